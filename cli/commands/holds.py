"""`fleet holds list|release`: the versions the nights hold fleet-wide (the state database's memory)."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.commands.memory import Dashboard, memory_path

if TYPE_CHECKING:
    from fleet.state.holds import HoldStore

app = typer.Typer(help="The versions the nights hold fleet-wide after they broke a site or failed on several.",
                  no_args_is_help=True)

WIDTH = 80  # a terminal's columns: an item is never cut, a reason is
StateDb = Annotated[Path | None, typer.Option("--state-db", help="A dashboard's memory file itself (default: the "
                                                                  "memory of --dashboard in FLEET_HOME).")]


def _store(state_db: Path | None, dashboard: str | None) -> HoldStore:
    """The hold store of the given file, or of the dashboard's memory in the home."""
    from fleet.state.holds import HoldStore

    return HoldStore(memory_path(state_db, dashboard))


@app.command("list")
def list_holds(state_db: StateDb = None, dashboard: Dashboard = None) -> None:
    """Every active hold, a few lines each (readable at 80 columns): the item and version whole, as `fleet holds
    release` takes them, its name, why it holds (culprit, suspect, failures) and since when, the site it broke or
    failed on, what was seen (cut after two lines), and when it would end."""
    store = _store(state_db, dashboard)
    if not store.path.is_file():  # never create an empty memory just by looking
        typer.echo(f"no version is held by the nights: no memory at {store.path} yet (FLEET_HOME or "
                   "FLEET_STATE_DB)")
        _operator_holds()
        return
    holds = store.active()
    if not holds:
        typer.echo(f"no version is held by the nights (state database: {store.path})")
        _operator_holds()
        return
    today = datetime.now(UTC).date()
    for hold in holds:
        typer.echo(f"{hold.item}@{hold.version}")
        about = (f"{hold.name or hold.slug} · held as a {hold.kind.value} since {hold.since.isoformat()} "
                 f"({hold.age_days(today)} d)")
        ends = hold.ends or "ends once a night has weighed it (see docs/pipeline.md); or fleet holds release it"
        for label, text in (("", about), ("site", hold.site or ""), ("why", " ".join(hold.reason.split())),
                            ("until", ends)):
            if text:
                typer.echo("\n".join(textwrap.wrap(f"{label}: {text}" if label else text, WIDTH, max_lines=2,
                                                   initial_indent="    ", subsequent_indent="      ",
                                                   placeholder=" …", break_on_hyphens=False)))
    from fleet.model.vocabulary import count

    typer.echo(f"{count(len(holds), 'hold')}; release one with: fleet holds release TYPE:SLUG[@VERSION]")
    _operator_holds()


def _operator_holds() -> None:
    """The operator's own holds, from the policy file the nights read (FLEET_POLICY_FILE): they end when their
    `expires` date passes or when they are taken out of the file, never by a night."""
    from fleet.model.settings import PipelineSettings
    from fleet.rules.policy import load_policy

    try:
        path = PipelineSettings().policy_file
        policy = load_policy(path) if path and path.is_file() else None
    except (ValueError, OSError) as error:
        typer.secho(f"the policy file's holds could not be read: {error}", fg=typer.colors.YELLOW, err=True)
        return
    if policy is None or not policy.holds:
        return
    typer.echo(f"and the operator's own (policy file {path}):")
    for hold in policy.holds:
        until = f"until {hold.expires.isoformat()}" if hold.expires else "until it is taken out of the file"
        typer.echo("\n".join(textwrap.wrap(f"{hold.item} · operator · {until}: {' '.join(hold.reason.split())}",
                                           WIDTH, max_lines=2, initial_indent="    ", subsequent_indent="      ",
                                           placeholder=" …", break_on_hyphens=False)))


@app.command("release")
def release(
    item: Annotated[str, typer.Argument(help="`slug`, `type:slug` or `type:slug@version`, as `fleet holds list` "
                                             "shows it.", show_default=False)],
    state_db: StateDb = None,
    dashboard: Dashboard = None,
) -> None:
    """Release the held versions ITEM names: the next night applies them again."""
    try:
        released = _store(state_db, dashboard).release(item, f"released by an operator on {datetime.now(UTC):%Y-%m-%d}")
    except ValueError as error:
        typer.secho(str(error), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    if not released:
        typer.secho(f"no held version matches {item!r} (see fleet holds list)", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    for hold in released:
        typer.echo(f"released {hold.item}@{hold.version} (held since {hold.since.isoformat()}: {hold.reason})")
