"""`fleet check`: check selected sites (the dashboard's check, a home-page probe, open incidents)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from cli.commands.selection import Clients, Sites, Tags, run_flow, selection

app = typer.Typer(help="Check selected sites: dashboard check, home-page probe, open incidents.",
                  invoke_without_command=True, no_args_is_help=False)


@app.callback()
def check(sites: Sites = None, tags: Tags = None, clients: Clients = None) -> None:
    """Run the check flow against FLEET_BASE_URL and print one line per site; exit 1 if any is unhealthy."""
    from flows.check import check_fleet

    chosen = selection(sites, tags, clients)
    checks = run_flow("check", lambda: check_fleet(selection=chosen))
    table = Table("site", "healthy", "HTTP", "ms", "incidents", "problem")
    for site_id, result in sorted(checks.items()):
        problem = result.error or result.probe_error or ""
        table.add_row(str(site_id), "yes" if result.healthy else "NO", str(result.http_code or ""),
                      str(result.response_ms or ""), str(result.open_incidents), problem)
    Console().print(table)
    if not all(result.healthy for result in checks.values()):
        raise typer.Exit(1)
