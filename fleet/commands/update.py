"""`fleet update`: apply the policy's updates to a selection now (no checks, no report)."""

from __future__ import annotations

import typer

from fleet.commands.selection import (
    Clients,
    DryRun,
    PolicyPath,
    ReportDir,
    Sites,
    Tags,
    Types,
    run_maintenance,
    selection,
)

app = typer.Typer(help="Apply the policy's updates to selected sites now (no health checks, no report).",
                  invoke_without_command=True, no_args_is_help=False)


@app.callback()
def update(dry_run: DryRun = False, policy: PolicyPath = None, sites: Sites = None, tags: Tags = None,
           clients: Clients = None, types: Types = None, report_dir: ReportDir = None) -> None:
    """Run the update flow against FLEET_BASE_URL and print where summary.json went."""
    from flows.update import update_fleet

    run_maintenance(update_fleet, "update run", dry_run=dry_run, policy=policy,
                    chosen=selection(sites, tags, clients, types), report_dir=report_dir)
