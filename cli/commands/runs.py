"""`fleet runs` and `fleet runs show RUN`: day two, at a terminal: how the last nights went, and one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="The last nights: when, how they ended, what they did, and where their reports are.",
                  invoke_without_command=True)

ReportDir = Annotated[Path | None, typer.Option("--report-dir", help="Where the run directories are (default: "
                                                                       "FLEET_REPORT_DIR, or reports in FLEET_HOME).")]


def _report_dir(given: Path | None) -> Path:
    from fleet.model.settings import PipelineSettings

    return given or PipelineSettings().report_dir


@app.callback()
def list_runs(
    context: typer.Context,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many of the newest runs.")] = 14,
    report_dir: ReportDir = None,
) -> None:
    """The newest runs, newest first: when, how it ended (as its exit code says), items counted as the reports
    count them, sites it broke, sites down at its end, reports sent."""
    if context.invoked_subcommand is not None:
        return
    from fleet.model.vocabulary import LIST_SEPARATOR, count
    from reporting.nights import recent_nights

    where = _report_dir(report_dir)
    nights = recent_nights(where, limit)
    if not nights:
        typer.echo(f"no run yet under {where} (FLEET_REPORT_DIR, or reports in FLEET_HOME)")
        return
    # plain columns that fit 80 characters; the run id says when (UTC), and `fleet runs show` takes it; S marks a
    # security run between nights
    line = "{:<24} {:1} {:<13} {:>7} {:>6} {:>7} {:>5} {:>4} {:>5}"
    typer.echo(line.format("run (started, UTC)", "", "status", "updated", "failed", "not upd", "broke", "down",
                           "sent"))
    for night in nights:
        kind = "S" if night.security_run else ""
        if night.dry_run:  # nothing was tried: its words, not columns of zeros
            counts = LIST_SEPARATOR.join([night.voice.done.said(night.done),
                                          night.voice.not_done.said(night.not_updated)])
            typer.echo(f"{night.run_id:<24} {kind:1} {night.status:<13} {counts}")
            continue
        typer.echo(line.format(night.run_id, kind, night.status, night.done, night.attention, night.not_updated,
                               len(night.broken), night.down, night.delivered))
    typer.echo("S: a security run between nights (fixes only); down: sites down at its end")
    typer.echo("not upd: found and not updated, failed included")
    typer.echo("sent: reports received, of those sent; .eml: written as .eml files, not sent")
    typer.echo(f"{count(len(nights), 'run')} under {where}; one in full: fleet runs show RUN (or: last)")


@app.command("show")
def show(
    run: Annotated[str, typer.Argument(help="A run id, its start, a run directory, or `last`.", show_default=False)],
    report_dir: ReportDir = None,
) -> None:
    """One run: how it ended, items by outcome, the sites it broke and those still down, holds, deliveries,
    problems, and where its summary and reports are."""
    from fleet.model.vocabulary import count
    from reporting.nights import matching_nights, read_night

    where = _report_dir(report_dir)
    found = matching_nights(where, run)
    if len(found) != 1:
        why = (f"no run {run!r} under {where}" if not found else
               f"{run!r} names {len(found)} runs: {', '.join(path.name for path in found[:5])}")
        typer.secho(why, fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    night = read_night(found[0])
    kind = ("dry " if night.dry_run else "") + ("security run" if night.security_run else "run")
    typer.echo(f"{kind} {night.run_id}: {night.status}")
    typer.echo(f"  started {night.started_at:%Y-%m-%d %H:%M:%S} UTC, took "
               f"{(night.finished_at - night.started_at).total_seconds() / 60:.1f} min"
               + (f", dashboard {night.dashboard}" if night.dashboard else ""))
    counts = night.voice.listed(night.said)
    typer.echo(f"  items: {counts or 'none'}"
               + (f" ({night.voice.not_done.said(night.not_updated)} in all)" if night.not_updated else ""))
    if night.did_nothing:
        typer.echo(f"  did nothing: {night.did_nothing}")
    for alarm in night.broken:
        typer.echo(f"  broke {alarm.site_name} ({alarm.site_url}): {alarm.saw}")
    for alarm in night.already_down:
        typer.echo(f"  down before the night: {alarm.site_name} ({alarm.site_url}): {alarm.saw}")
    if not night.dry_run:
        typer.echo(f"  down at the night's end: {count(night.down, 'site')}")
    for incident in night.open_incidents:
        typer.echo(f"  incident {incident.id} open: {incident.site_name} ({incident.site_url}), {incident.headline}, "
                   f"since run {incident.opened_by} (fleet incidents show {incident.id})")
    for hold in night.holds:
        typer.echo(f"  holds {hold.type.value}:{hold.slug}@{hold.version} since {hold.since}: {hold.reason}")
    for delivery in night.deliveries:
        how = "held for review" if delivery.held else (f"written as .eml: {delivery.eml_path}" if delivery.eml_path
                                                       else "sent" if delivery.accepted else "NOT sent")
        to = f" -> {delivery.recipient}" if delivery.recipient else ""  # a file to forward names nobody
        typer.echo(f"  report {delivery.report}{to}: {how}")
    for problem in night.errors:
        typer.echo(f"  problem: {problem}")
    typer.echo(f"  summary: {night.directory / 'summary.json'}")
    typer.echo(f"  report:  {night.report}")
