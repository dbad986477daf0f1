"""`fleet nightly`: run the nightly maintenance flow against the dashboard configured in the environment."""

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

app = typer.Typer(help="Run the nightly maintenance flow (sync, updates, checks, reconcile, summary, report).",
                  invoke_without_command=True, no_args_is_help=False)


@app.callback()
def nightly(dry_run: DryRun = False, policy: PolicyPath = None, sites: Sites = None, tags: Tags = None,
            clients: Clients = None, types: Types = None, report_dir: ReportDir = None) -> None:
    """Run the nightly flow against FLEET_BASE_URL and print where summary.json went."""
    from flows.nightly import nightly_maintenance

    run_maintenance(nightly_maintenance, "nightly run", dry_run=dry_run, policy=policy,
                    chosen=selection(sites, tags, clients, types), report_dir=report_dir)
