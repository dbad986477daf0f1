"""`fleet incidents list|show|close`: the sites the nights broke, open until a check passes and nothing a night
switched off is still off (the state database's incidents), or until an operator closes one with a reason."""

from __future__ import annotations

import textwrap
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.commands.memory import Dashboard, memory_path

if TYPE_CHECKING:
    from fleet.model.summary import Incident
    from fleet.state.incidents import IncidentStore

app = typer.Typer(help="The sites the nights broke: open incidents until a check passes and nothing a night "
                       "switched off is still off.", no_args_is_help=True)

StateDb = Annotated[Path | None, typer.Option("--state-db", help="A dashboard's memory file itself (default: the "
                                                                  "memory of --dashboard in FLEET_HOME).")]
WIDTH = 80


def _store(state_db: Path | None, dashboard: str | None) -> IncidentStore:
    from fleet.state.incidents import IncidentStore

    return IncidentStore(memory_path(state_db, dashboard))


def _wrapped(label: str, text: str, lines: int = 3) -> list[str]:
    """`label: text` indented, wrapped to the terminal's 80 columns and cut after `lines` lines."""
    return textwrap.wrap(f"{label}: {text}", WIDTH, initial_indent="    ", subsequent_indent="      ",
                         max_lines=lines, placeholder=" …", break_on_hyphens=False)


def _state(incident: Incident, today: date) -> str:
    from fleet.model.vocabulary import count

    age = incident.age_days(today)
    opened = f"since {incident.opened_at:%Y-%m-%d}, run {incident.opened_by}"
    return f"{incident.headline} · {'opened today' if age == 0 else 'open ' + count(age, 'day')} ({opened})"


@app.command("list")
def list_incidents(
    state_db: StateDb = None,
    dashboard: Dashboard = None,
    all_: Annotated[bool, typer.Option("--all", help="Closed incidents too.")] = False,
) -> None:
    """The open incidents (with --all, the closed ones too), oldest first, each in a few lines."""
    incidents = _store(state_db, dashboard).listed(include_closed=all_)
    if not incidents:
        typer.echo("no incident" if all_ else "no open incident")
        return
    today = datetime.now(UTC).date()
    for incident in incidents:
        typer.echo(f"incident {incident.id}: {incident.site_name} ({incident.site_url})")
        for line in _wrapped("state", _state(incident, today)) + _wrapped("last look", incident.last_look, 2):
            typer.echo(line)
    from fleet.model.vocabulary import count

    still_open = sum(1 for incident in incidents if incident.is_open)
    typer.echo(f"{count(still_open, 'open incident')}; details: fleet incidents show ID; "
               "close one: fleet incidents close ID --reason TEXT")


@app.command("show")
def show(
    incident_id: Annotated[int, typer.Argument(metavar="ID", help="The incident's number (fleet incidents list).")],
    state_db: StateDb = None,
    dashboard: Dashboard = None,
) -> None:
    """Everything about one incident: the site, what broke it, what the nights did, what to do, its last look."""
    incident = _store(state_db, dashboard).get(incident_id)
    if incident is None:
        typer.secho(f"no incident {incident_id} (see fleet incidents list --all)", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    today = datetime.now(UTC).date()
    culprit = [incident.culprit] if incident.culprit else incident.suspects
    fields = [
        ("state", _state(incident, today)),
        ("dashboard", incident.dashboard),
        ("dashboard page", incident.dashboard_page or ""),
        ("what was seen", incident.saw),
        ("culprit" if incident.culprit else "suspects", "; ".join(
            f"{s.name or s.slug} ({s.type.value}:{s.slug}) {s.from_version or '?'} -> {s.to_version or '?'}"
            for s in culprit)),
        ("still deactivated", ", ".join(incident.deactivated)),
        ("what the nights did", incident.done),
        ("what to do", incident.next_steps),
        ("last look", incident.last_look),
        ("closed", f"{incident.closed_at:%Y-%m-%d %H:%M} by {incident.closed_by}: {incident.close_reason}"
         if incident.closed_at else ""),
    ]
    typer.echo(f"incident {incident.id}: {incident.site_name} ({incident.site_url})")
    for label, text in fields:
        if text:
            for line in _wrapped(label, text, lines=12):
                typer.echo(line)


@app.command("close")
def close(
    incident_id: Annotated[int, typer.Argument(metavar="ID", help="The incident's number (fleet incidents list).")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is closed (kept with the incident).")],
    state_db: StateDb = None,
    dashboard: Dashboard = None,
) -> None:
    """Close an open incident by hand, saying why: the nights stop reporting it (and alerting about it)."""
    if not reason.strip():
        typer.secho("--reason must say why the incident is closed", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    closed = _store(state_db, dashboard).close(incident_id, "operator", reason.strip(), datetime.now(UTC))
    if closed is None:
        typer.secho(f"no open incident {incident_id} (see fleet incidents list)", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    typer.echo(f"closed incident {closed.id}: {closed.site_name} ({closed.site_url}): {reason.strip()}")
