"""`patch_vulnerabilities`: between nights, the fixes that should not wait for the next one.

under the dashboard's night lock: which sites are offered a fix at or above the policy's `security:` threshold (the
dashboard's last sync, the feed read again when due) -> for those sites only, the night's sentence with only those
fixes (sync, plan, cohorts, checks, containment, reconcile, summary) -> the report.
"""

from __future__ import annotations

from prefect import flow, get_run_logger

from fleet.engine.memory import NightMemory
from fleet.engine.night import NightRequest
from fleet.model.summary import Selection
from fleet.rules.breakage import SitesBrokenByRun, broken_message
from fleet.state.night_lock import NightBusy
from flows.parameters import (
    DryRun,
    LockWaitSeconds,
    PolicyFile,
    ReportDir,
    SavedDashboard,
    SavedEmailServer,
    SendReport,
)
from flows.sync import dashboard_memory, open_dashboard
from flows.update import maintain_fleet
from orchestration.alert import alert_operator
from orchestration.limits import night_lock
from orchestration.preflight import check_settings
from reporting.settings import MailSettings
from tasks.vulnerabilities import find_offered_fixes_task


@flow(name="security-patch", log_prints=False, on_failure=[alert_operator], on_crashed=[alert_operator])
async def patch_vulnerabilities(
    dry_run: DryRun = False,
    policy_file: PolicyFile = "",
    report_dir: ReportDir = "",
    dashboard: SavedDashboard = None,
    send_report: SendReport = True,
    email_block: SavedEmailServer = None,
    lock_wait_seconds: LockWaitSeconds = 60.0,
) -> str:
    """Apply now the updates that fix a known vulnerability at or above the policy's threshold, on the sites offered
    one, and nothing else; returns summary.json's path, or "" when no site is offered such a fix or a night of the
    dashboard is running (it applies them itself). Ends Failed (`SitesBrokenByRun`) when a fix broke sites.
    The reports go out only when something was planned.
    """
    request = NightRequest(dry_run=dry_run, policy_file=policy_file, report_dir=report_dir, run_checks=not dry_run,
                           fixes_only=True)
    mail = check_settings(request, dashboard_from_environment=dashboard is None,
                          mail=(lambda: MailSettings.for_block(email_block)) if send_report else None).mail
    settings, policy = request.settings_and_policy()
    logger = get_run_logger()
    try:
        async with night_lock(dashboard_memory(dashboard, settings), "security", lock_wait_seconds):
            async with await open_dashboard(dashboard, settings) as client:
                memory = NightMemory(settings, client.settings.base_url)
                sites = await find_offered_fixes_task(client, memory.settings, policy)
            if not sites:
                return ""
            request.selection = Selection(sites=[str(site_id) for site_id in sites])
            run_dir = await maintain_fleet(request, dashboard, memory)
    except NightBusy as busy:
        logger.info("security: %s: the running night applies the fixes itself", busy)
        return ""
    from tasks.report import report_run  # pandas and matplotlib load only when there is something to report

    result = await report_run(run_dir, send=send_report, settings=mail)
    if result.broken:  # Failed, as a night that broke sites: the automations and notifications fire
        raise SitesBrokenByRun(broken_message(result.broken, result.run_id), str(run_dir / "summary.json"))
    return str(run_dir / "summary.json")
