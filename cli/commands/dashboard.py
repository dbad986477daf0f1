"""`fleet dashboard`: look at a dashboard from the terminal (connection from `FLEET_*` variables or `.env`).

Exit codes: 0 done; 2 bad usage or configuration; 3 authentication or permission refused; 4 dashboard
unreachable (network, TLS, timeout, or a write whose outcome is unknown); 5 the dashboard answered with an
error (not found, invalid input, server error, unexpected answer); 6 a waited-on job did not finish
(timed out, stalled, never started).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cli.errors import exit_code_for
from dashboard import DashboardClient
from dashboard.errors import DashboardError
from dashboard.models import JobStatus, UpdateType

app = typer.Typer(help="Look at a dashboard (connection from FLEET_* environment variables or .env).",
                  no_args_is_help=True)


JSON_OPTION = typer.Option(False, "--json", help="Print JSON instead of a table.")


def run(call: Callable[[DashboardClient], Awaitable[Any]]) -> Any:
    """Run one call with a client from the environment; a failure prints one line and exits with its code."""
    err = Console(stderr=True)

    async def main() -> Any:
        async with DashboardClient.from_env() as client:
            return await call(client)

    try:
        return asyncio.run(main())
    except DashboardError as exc:
        err.print(Text.assemble(("error: ", "red"), str(exc)), highlight=False, soft_wrap=True)
        raise typer.Exit(exit_code_for(exc)) from None


def emit(rows: Sequence[BaseModel] | BaseModel, columns: Sequence[str], as_json: bool, title: str) -> None:
    """A table of `columns`, or the full models as JSON."""
    console = Console()
    items = [rows] if isinstance(rows, BaseModel) else list(rows)
    if as_json:
        payload = [item.model_dump(mode="json") for item in items]
        typer.echo(json.dumps(payload[0] if isinstance(rows, BaseModel) else payload, indent=2))
        return
    table = Table(title=f"{title} ({len(items)})")
    for column in columns:
        table.add_column(column)
    for item in items:
        values = item.model_dump(mode="json")
        table.add_row(*("" if values.get(c) is None else str(values.get(c)) for c in columns))
    console.print(table)


@app.command()
def sites(as_json: bool = JSON_OPTION) -> None:
    """Every site: id, name, URL, status, last sync."""
    found = run(lambda c: c.list_sites())
    emit(found, ["id", "name", "url", "status", "wp_version", "last_sync"], as_json, "sites")


@app.command()
def updates(
    update_type: UpdateType | None = typer.Option(None, "--type", help="Only this type of update."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Pending updates (ignored ones are left out, as the dashboard does)."""
    found = run(lambda c: c.list_updates(type=update_type))
    emit(found, ["site_id", "site_name", "type", "slug", "current_version", "new_version"], as_json, "updates")


@app.command()
def ignored(
    site: str | None = typer.Option(None, "--site", help="Only this site (id or domain)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Ignored updates, global and per site."""
    found = run(lambda c: c.list_ignored_updates(site))
    emit(found, ["site_id", "site_name", "type", "slug", "ignored_version"], as_json, "ignored updates")


@app.command()
def abilities(
    category: str | None = typer.Option(None, "--category", help="Only this category."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Registered abilities with the HTTP method their run needs."""
    found = run(lambda c: c.list_abilities(category))
    if as_json:
        emit(found, [], True, "abilities")
        return
    table = Table(title=f"abilities ({len(found)})")
    for column in ("name", "category", "method", "readonly", "destructive", "idempotent"):
        table.add_column(column)
    for ability in found:
        notes = ability.annotations
        table.add_row(ability.name, ability.category, ability.run_method, str(notes.readonly),
                      str(notes.destructive), str(notes.idempotent))
    Console().print(table)


@app.command()
def job(
    job_id: str = typer.Argument(..., help="A batch job id (sync_..., update_..., check_...)."),
    wait: bool = typer.Option(False, "--wait", help="Poll until the job finishes."),
    deadline: float = typer.Option(3600.0, "--deadline", help="Seconds to wait at most (with --wait)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """The status of a batch job, or wait for it to finish."""
    err = Console(stderr=True)

    def progress(status: JobStatus) -> None:
        err.print(f"{status.status.value}: {status.processed}/{status.total} ({status.progress}%)")

    async def call(client: DashboardClient) -> JobStatus:
        if wait:
            return await client.wait_for_job(job_id, deadline=deadline, on_progress=progress)
        return await client.job_status(job_id)

    status = run(call)
    emit(status, ["job_id", "type", "status", "progress", "processed", "total", "succeeded", "failed",
                  "started_at", "completed_at"], as_json, "job")
