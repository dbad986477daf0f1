"""`fleet vulnerabilities [show|refresh]`: the fleet's known vulnerabilities at a terminal, by site or by
vulnerability, as the last night saw them (its summary.json); and the vulnerability feed read now. `fleet vulns`, its
old name, still works (hidden from the help) for existing scripts."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

if TYPE_CHECKING:
    from reporting.rows import ReportSummary

app = typer.Typer(help="The fleet's known vulnerabilities (the Wordfence Intelligence feed, matched each night); "
                  "alone, as `fleet vulnerabilities show`.", invoke_without_command=True)

RunDir = Annotated[Path | None, typer.Option("--run", help="A run directory (default: the latest run under "
                                                           "FLEET_REPORT_DIR).")]


def _latest(run: Path | None) -> Path:
    from fleet.model.settings import PipelineSettings
    from fleet.model.summary import run_directories

    if run is not None:
        return run
    runs = run_directories(PipelineSettings().report_dir)
    if not runs:  # not a mistake: nothing to list yet, as `fleet runs` says it
        typer.echo("no run yet: no summary.json under FLEET_REPORT_DIR (run `fleet nightly` first)")
        raise typer.Exit(0)
    return runs[-1]


def _lines(summary: ReportSummary) -> list[tuple[str, str, str, str]]:
    """(site, item, what, vulnerabilities) of every vulnerable item, as the reports sort them (fixed, not installed,
    no fix offered); each says how long its advisory has been public (or how soon after it the fix was installed)."""
    from reporting.vulnerability_section import span
    from reporting.vulnerable_items import VulnerableItem, vulnerable_items

    def line(entry: VulnerableItem, what: str) -> tuple[str, str, str, str]:
        if entry.public_hours is not None:
            hours = span(entry.public_hours)
            what += f" ({hours} after its advisory)" if entry.installed else f" (public for {hours})"
        return (f"{entry.site_name} ({entry.site_url})", f"{entry.type} {entry.name}", f"{entry.version}: {what}",
                entry.labels)

    found = vulnerable_items(summary, summary.items)
    return ([line(entry, f"fix {entry.word}") for entry in found.fixed + found.not_installed]
            + [line(entry, "no fix offered") for entry in found.open])


@app.callback()
def listing(context: typer.Context) -> None:
    """`fleet vulnerabilities` alone lists what `fleet vulnerabilities show` lists: the last night's vulnerable items
    by site."""
    if context.invoked_subcommand is None:
        show(run=None, by="site")


@app.command("show")
def show(run: RunDir = None,
         by: Annotated[Literal["site", "vulnerability"], typer.Option(help="Group by site or by vulnerability.")]
         = "site") -> None:
    """What the last night found: each site's vulnerable items (fixed, held, no fix yet), or each vulnerability
    with its sites; then the feed's age and attribution."""
    from fleet.model.vocabulary import count
    from reporting.rows import SummaryError, read_summary

    run_dir = _latest(run)
    try:
        summary = read_summary(run_dir)
    except (SummaryError, OSError) as error:
        typer.secho(str(error), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    feed = summary.vulnerability_feed
    if feed is None:
        typer.echo(f"run {summary.run_id} did not check known vulnerabilities (a run before the feed was set up)")
        return
    rows = _lines(summary)
    groups: dict[str, list[str]] = defaultdict(list)
    for site, item, what, vulnerabilities in rows:
        if by == "site":
            groups[site].append(f"{item} {what}: {vulnerabilities}")
        else:
            for label in vulnerabilities.split("; "):
                groups[label].append(f"{site}: {item} {what}")
    for key in sorted(groups):
        typer.echo(key)
        for line in groups[key]:
            typer.echo(f"    {line}")
    unchecked = len(summary.unchecked_sites)
    counted = (f"{count(len(groups), 'site')} with a known vulnerability" if by == "site"
               else f"{count(len(groups), 'known vulnerability', 'known vulnerabilities')} on the fleet")
    typer.echo(f"{counted}; {count(unchecked, 'site')} unchecked (never read as clean); run {summary.run_id}")
    if summary.exposure_stats is not None:
        typer.echo(f"across nights: {summary.exposure_stats.sentence}")
    typer.echo(f"feed: the copy of {feed.source}, " + (
        f"fetched {feed.fetched_at} ({feed_age(feed.fetched_at, summary.finished_at)})" if feed.fetched_at
        else "never fetched") + (f"; last problem: {feed.problem}" if feed.problem else ""))
    typer.echo(feed.attribution)


def feed_age(fetched_at: str, at: datetime) -> str:
    """How old the copy of the feed was when the run matched against it."""
    hours = (at - datetime.fromisoformat(fetched_at)).total_seconds() / 3600
    return f"{hours:.0f} h old" if hours >= 1 else "less than an hour old"


@app.command("refresh")
def refresh() -> None:
    """Read the vulnerability feed now (FLEET_VULN_FEED), whatever FLEET_VULN_REFRESH says; one line either way."""
    import logging

    from pydantic import ValidationError

    from fleet.engine.vulnerability_feed import refresh_feed
    from fleet.model.settings import PipelineSettings
    from fleet.model.vocabulary import count
    from fleet.state.vulnerabilities import VulnerabilityStore
    from vulnfeed.settings import FeedSettings

    try:
        settings = FeedSettings()
    except ValidationError as error:
        first = error.errors()[0]
        typer.secho(f"FLEET_{str(first['loc'][0]).upper()}: {first['msg']}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    if settings.is_url and settings.vuln_feed_key is None:
        typer.secho("FLEET_VULN_FEED_KEY is not set: the feed's URL needs a (free) Wordfence Intelligence key",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    logging.getLogger("fleet").addHandler(logging.NullHandler())  # the line below says it: not Python's too
    store = VulnerabilityStore(PipelineSettings().home_state_path)  # the feed's copy is the home's own
    try:
        status = refresh_feed(settings, store, force=True)
    finally:
        store.close()
    if status.problem:
        typer.secho(f"{status.problem}; the last good copy stays in use (fetched {status.fetched_at or 'never'})",
                    fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    typer.echo(f"read {status.records:,} record{'' if status.records == 1 else 's'} from {status.source}"
               + (f"; {count(len(status.skipped), 'odd record')} left out: {status.skipped[0]}" if status.skipped
                  else ""))
