"""`nightly_maintenance`: the whole night in one flow, from sync to the report.

the sentence of `flows.update` (sync and detect per chunk -> policy -> plan -> lanes of sites through every
update type, the sensor, checks, re-sync and reconcile -> summary), then the report.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import UTC, datetime

from prefect import flow

from fleet.engine.night import NightRequest
from fleet.model.summary import Selection
from fleet.rules.breakage import SitesBrokenByRun, broken_message
from fleet.rules.empty_night import NightDidNothing
from fleet.rules.incidents import SitesStillDown, still_down_message
from flows.parameters import (
    DryRun,
    FleetSelection,
    PlanMoment,
    PolicyFile,
    ReportDir,
    SavedDashboard,
    SavedEmailServer,
    SendReport,
)
from flows.sync import dashboard_memory
from flows.update import maintain_fleet
from orchestration.alert import alert_operator
from orchestration.limits import night_lock
from orchestration.preflight import check_settings
from reporting.settings import MailSettings


@flow(name="nightly-maintenance", log_prints=False, on_failure=[alert_operator], on_crashed=[alert_operator])
async def nightly_maintenance(
    selection: FleetSelection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dry_run: DryRun = False,
    policy_file: PolicyFile = "",
    report_dir: ReportDir = "",
    dashboard: SavedDashboard = None,
    send_report: SendReport = True,
    email_block: SavedEmailServer = None,
    at: PlanMoment = None,
) -> str:
    """Patch the selected sites, account for every item, write summary.json and the reports; returns its path.

    Ends Failed (`SitesBrokenByRun`, naming them) when the night broke sites, after the reports went out; and
    (`SitesStillDown`) when sites broken on earlier nights are still down, or (`NightDidNothing`) when it synced
    no site or attempted none of its updates.
    """
    request = NightRequest(selection=selection, dry_run=dry_run, policy_file=policy_file, report_dir=report_dir,
                           run_checks=not dry_run, at=at)
    # every setting, the mail's included, before the first write: a night must not apply updates it cannot report
    # (a report sent over SMTP needs FLEET_MAIL_FROM)
    checked = check_settings(request, dashboard_from_environment=dashboard is None,
                             mail=(lambda: MailSettings.for_block(email_block)) if send_report else None)
    # one run at a time per dashboard: its security runs wait for the night (under `maintain-dashboards`, whose
    # nights get a saved block, the fan-out holds the block's lock for its child)
    async with night_lock(dashboard_memory(dashboard, checked.settings), "nightly",
                          checked.settings.night_lock_wait_seconds) if dashboard is None else nullcontext():
        run_dir = await maintain_fleet(request, dashboard)
    # The report step's libraries (pandas, matplotlib: ~75 MB) load only now, not for the whole night.
    from tasks.report import report_run

    # a dry run's report goes to the operator only (deliver_reports never mails clients about one)
    result = await report_run(run_dir, send=send_report, settings=checked.mail)
    if result.broken:  # Failed, so that Prefect's own automations and notifications fire
        raise SitesBrokenByRun(broken_message(result.broken, result.run_id), str(run_dir / "summary.json"))
    if result.still_down:  # never a green night while a site an earlier night broke is down
        raise SitesStillDown(still_down_message(result.still_down, result.run_id, datetime.now(UTC).date()),
                             str(run_dir / "summary.json"))
    if result.did_nothing:  # a quiet report must not read as "all is well"
        raise NightDidNothing(f"run {result.run_id} did nothing: {result.did_nothing}", str(run_dir / "summary.json"))
    return str(run_dir / "summary.json")
