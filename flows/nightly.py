"""`nightly_maintenance`: the whole night in one flow, from sync to the report.

the sentence of `flows.update` (sync and detect per chunk -> policy -> plan -> lanes of sites through every
update type, the sensor, checks, re-sync and reconcile -> summary), then the report.
"""

from __future__ import annotations

from datetime import datetime

from prefect import flow

from fleet.summary import Selection
from flows.update import maintain_fleet


@flow(name="nightly-maintenance", log_prints=False)
async def nightly_maintenance(
    selection: Selection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dry_run: bool = False,
    policy_file: str | None = None,
    report_dir: str | None = None,
    dashboard: str | None = None,
    send_report: bool = True,
    email_block: str | None = None,
    at: datetime | None = None,
) -> str:
    """Patch the selected sites, account for every item, write summary.json and the reports; returns its path.

    Args:
        selection: Which sites (ids or domains), tags, clients and update types; empty lists mean all.
        dry_run: Plan only: read the dashboard, write the plan and the summary, send no write request.
        policy_file: Policy file (YAML or TOML); empty means FLEET_POLICY_FILE, or apply everything.
        report_dir: Where the run directory goes; empty means FLEET_REPORT_DIR.
        dashboard: Name of a saved Dashboard Connection block; empty means the FLEET_* environment.
        send_report: E-mail the reports to the operator and the clients (a dry run never sends).
        email_block: Name of a prefect-email EmailServerCredentials block; empty means FLEET_SMTP_*.
        at: Dry runs only: plan as if it were this moment (rehearse windows and blackouts); empty means now.
    """
    run_dir = await maintain_fleet(selection=selection, dry_run=dry_run, policy_file=policy_file,
                                   report_dir=report_dir, dashboard=dashboard, run_checks=not dry_run, at=at)
    # The report step's libraries (pandas, matplotlib: ~75 MB) load only now, not for the whole night.
    from flows.report import mail_settings
    from tasks.report import report_run

    send = send_report and not dry_run
    await report_run(run_dir, send=send, settings=await mail_settings(email_block) if send else None)
    return str(run_dir / "summary.json")
