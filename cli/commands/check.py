"""`fleet check`: check selected sites (the dashboard's check, a home-page probe, the uptime monitors' open alerts;
"incident" is kept for the sites the nights broke: `fleet incidents`)."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from cli.commands.selection import Clients, Sites, Tags, run_flow, selection
from fleet.model.vocabulary import count

app = typer.Typer(help="Check selected sites: dashboard check, home-page probe, open uptime alerts.",
                  invoke_without_command=True, no_args_is_help=False)


@app.callback()
def check(sites: Sites = None, tags: Tags = None, clients: Clients = None) -> None:
    """Run the check flow against FLEET_BASE_URL and print one line per site and a summary line; exit 1 if any
    site is unhealthy (the other exit codes: cli/errors.py)."""
    from fleet.model.summary import HealthCheck
    from flows.check import check_fleet

    chosen = selection(sites, tags, clients)
    checked = run_flow("check failed", lambda: check_fleet(selection=chosen))
    table = Table("id", "site", "healthy", "HTTP", "ms", "uptime alerts", "problem")
    for site in sorted(checked, key=lambda site: (site.site_name.casefold(), site.site_id)):
        result = site.check or HealthCheck()
        table.add_row(str(site.site_id), f"{site.site_name}\n{site.site_url}", "yes" if result.healthy else "NO",
                      str(result.http_code or ""), str(result.response_ms or ""), str(result.open_incidents),
                      result.problem)
    Console().print(table)
    unhealthy = [site for site in checked if not (site.check or HealthCheck()).healthy]
    alerts = sum((site.check or HealthCheck()).open_incidents for site in checked)
    typer.echo(f"{count(len(checked), 'site')} checked: {len(checked) - len(unhealthy)} healthy, {len(unhealthy)} "
               f"need attention, {count(alerts, 'open uptime alert')}")
    if unhealthy:
        raise typer.Exit(1)
