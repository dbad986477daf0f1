"""`fleet memory [move OLD NEW]`: the dashboards whose memory this home keeps, one folder each, and keeping a moved
dashboard's memory. Also how `fleet holds` and `fleet incidents` find the memory they read."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="The dashboards whose memory (holds, incidents, the journal, ...) this home keeps.",
                  invoke_without_command=True)

Dashboard = Annotated[str | None, typer.Option(
    "--dashboard", help="The dashboard's address (its REST prefix, as FLEET_BASE_URL); default: FLEET_BASE_URL, "
    "or the only dashboard this home keeps.")]


def configured_dashboard() -> str | None:
    """FLEET_BASE_URL, wherever it was set; None when it is not (or the dashboard's settings are incomplete)."""
    from pydantic import ValidationError

    from dashboard.settings import DashboardSettings

    try:
        return DashboardSettings().base_url
    except ValidationError:
        return None


def memory_path(state_db: Path | None, dashboard: str | None) -> Path:
    """The database a command reads: `--state-db` as given, else the memory of the dashboard named (`--dashboard`,
    else FLEET_BASE_URL), else of the only one this home keeps, else the home's own database (a home written before
    the memory was kept per dashboard); a line and exit 2 when it keeps several and none is named. An old state
    database found beside the reports is moved into the home first, and a dashboard's share of a home written
    before the split is taken into its folder: both said."""
    if state_db is not None:
        return state_db
    from fleet.model.settings import PipelineSettings
    from fleet.state.continuity import adopt_legacy_state
    from fleet.state.dashboard_memory import (
        DashboardMemory,
        DashboardMemoryError,
        adopt_shared_memory,
        known_dashboards,
    )

    settings = PipelineSettings()
    said = [adopt_legacy_state(settings)]
    url = dashboard or configured_dashboard()
    known = known_dashboards(settings.home_state_path)
    if not url and len(known) > 1:
        typer.secho(f"this home ({settings.home_state_path.parent}) keeps the memory of {len(known)} dashboards "
                    f"({', '.join(known)}): name one with --dashboard URL", fg=typer.colors.RED, err=True)
        raise typer.Exit(2)
    url = url or (known[0] if known else None)
    if url is None:
        path = settings.home_state_path
    else:
        try:
            memory = DashboardMemory(settings.home_state_path, url)
        except DashboardMemoryError as error:
            typer.secho(str(error), fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        if not memory.path.exists():  # taken now rather than by the dashboard's next night
            said.append(adopt_shared_memory(memory.home_db, memory.base_url, memory.path))
            if said[-1]:
                memory.open()
        path = memory.path
    for note in filter(None, said):
        typer.secho(note, fg=typer.colors.YELLOW, err=True)
    return path


@app.callback()
def list_memories(context: typer.Context) -> None:
    """Each dashboard whose memory this home keeps: its address, its folder and its size."""
    if context.invoked_subcommand is not None:
        return
    from fleet.model.settings import PipelineSettings
    from fleet.model.vocabulary import count
    from fleet.state.dashboard_memory import DashboardMemory, known_dashboards

    home_db = PipelineSettings().home_state_path
    known = known_dashboards(home_db)
    if not known:
        typer.echo(f"this home ({home_db.parent}) keeps no dashboard's memory yet")
        return
    for url in known:
        memory = DashboardMemory(home_db, url)
        size = sum(path.stat().st_size for path in memory.folder.rglob("*") if path.is_file())
        typer.echo(f"{url}\n    {memory.folder} ({size / 1024:,.0f} KiB)")
    typer.echo(f"{count(len(known), 'dashboard')}; the vulnerability feed's copy is the home's own: {home_db}")


@app.command("move")
def move(
    old: Annotated[str, typer.Argument(help="The dashboard's former address (as FLEET_BASE_URL was).")],
    new: Annotated[str, typer.Argument(help="Its new address.")],
) -> None:
    """Keep a dashboard's memory after it moved to a new address: holds, incidents and the journal follow it. A
    change of scheme only (http to https) needs nothing: the memory is kept by host, port and path."""
    from fleet.model.settings import PipelineSettings
    from fleet.state.dashboard_memory import DashboardMemoryError, move_memory

    try:
        typer.echo(move_memory(PipelineSettings().home_state_path, old, new))
    except DashboardMemoryError as error:
        typer.secho(str(error), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
