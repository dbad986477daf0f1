"""`fleet update`: apply the policy's updates to a selection now (no checks, no report)."""

from __future__ import annotations

import asyncio

import typer

from fleet.commands.selection import (
    Clients,
    DryRun,
    PolicyPath,
    ReportDir,
    Sites,
    Tags,
    Types,
    check_policy,
    print_summary,
    selection,
)

app = typer.Typer(help="Apply the policy's updates to selected sites now (no health checks, no report).",
                  invoke_without_command=True, no_args_is_help=False)


@app.callback()
def update(dry_run: DryRun = False, policy: PolicyPath = None, sites: Sites = None, tags: Tags = None,
           clients: Clients = None, types: Types = None, report_dir: ReportDir = None) -> None:
    """Run the update flow against FLEET_BASE_URL and print where summary.json went."""
    from dashboard.errors import DashboardError
    from fleet.policy import PolicyError
    from flows.update import update_fleet

    chosen = selection(sites, tags, clients, types)
    check_policy(policy)
    try:
        path = asyncio.run(update_fleet(
            selection=chosen, dry_run=dry_run, policy_file=str(policy) if policy else None,
            report_dir=str(report_dir) if report_dir else None,
        ))
    except (DashboardError, PolicyError) as error:
        typer.secho(f"update run failed: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    print_summary(path)
