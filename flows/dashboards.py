"""`maintain_dashboards`: one night over many dashboards, each one's night on whichever worker picks it up.

which dashboards -> does each answer -> its own limits -> one `nightly-maintenance` flow run per dashboard on the
work pool, side by side, each waited for -> one estate -> the combined report.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from prefect import flow, get_run_logger
from prefect.states import Failed, State

from fleet.engine.estate import DashboardNight, Estate
from fleet.engine.night import pipeline_settings
from fleet.model.summary import Selection
from flows.parameters import SavedEmailServer
from flows.update import run_identity
from reporting.settings import MailSettings
from tasks.dashboards import (
    dashboard_night_task,
    ensure_dashboard_limits_task,
    reach_dashboard_task,
    saved_dashboards_task,
)
from tasks.estate import report_estate_task

NIGHT_DEPLOYMENT = "nightly-maintenance/dashboard-night"
ESTATE_DIR = "estate"


def night_parameters(
    selection: Selection, dry_run: bool, policy_file: str, send_report: bool, email: SavedEmailServer
) -> dict[str, object]:
    """The parameters of every dashboard's night (the e-mail block goes as a reference to the same saved block)."""
    parameters: dict[str, object] = {"selection": selection.model_dump(mode="json"), "dry_run": dry_run,
                                     "policy_file": policy_file, "send_report": send_report}
    if email is not None:
        parameters["email_block"] = email.model_dump(context={"serialize_blocks_as_references": True})
    return parameters


@flow(name="maintain-dashboards", log_prints=False)
async def maintain_dashboards(
    dashboards: list[str] | None = None,
    selection: Selection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dry_run: bool = False,
    policy_file: str = "",
    report_dir: str = "",
    send_report: bool = True,
    email_block: SavedEmailServer = None,
    environment: dict[str, dict[str, str]] | None = None,
    deployment: str = NIGHT_DEPLOYMENT,
    lock_wait_seconds: float = 60.0,
) -> Estate | State:
    """Run the night of every dashboard at once, each on the work pool, and combine them into one report.

    A dashboard that does not answer, or whose night fails, does not stop the others; the run then ends Failed,
    naming them, after the combined report is written (its data is the same combined result).

    Args:
        dashboards: Names of saved Dashboard Connection blocks; empty means every saved one.
        selection: Which sites, tags, clients and update types on every dashboard; empty lists mean all.
        dry_run: Plan only, on every dashboard.
        policy_file: Policy file for every dashboard; empty means each worker's FLEET_POLICY_FILE.
        report_dir: A directory every worker shares; each dashboard's runs go to REPORT_DIR/<block>, the
            combined report to REPORT_DIR/estate/<run id>. Empty means FLEET_REPORT_DIR.
        send_report: E-mail each dashboard's reports and the combined one (a dry run never sends).
        email_block: A saved prefect-email Email Server Credentials block; none chosen means FLEET_SMTP_*.
        environment: Extra variables for one dashboard's night, by block name (its policy file, recipients...).
        deployment: The deployment each dashboard's night runs as (`flow name/deployment name`).
        lock_wait_seconds: How long another night may hold a dashboard's night lock before this one is busy.
    """
    logger = get_run_logger()
    started = datetime.now(UTC)
    run_id = run_identity(started)
    settings = pipeline_settings(report_dir)
    mail = MailSettings.for_block(email_block) if send_report and not dry_run else None  # unusable: said now
    root = settings.report_dir.resolve()
    blocks = list(dict.fromkeys(dashboards or await saved_dashboards_task()))
    if not blocks:
        raise ValueError("no saved Dashboard Connection blocks: save one (`fleet blocks save --dashboard NAME`)")
    logger.info("%d dashboard(s): %s", len(blocks), ", ".join(blocks))
    parameters = night_parameters(selection, dry_run, policy_file, send_report, email_block)

    async def night(block: str) -> DashboardNight:
        reach = await reach_dashboard_task(block)
        if reach.status is not None:
            logger.warning("dashboard %s: %s: %s", block, reach.status.value, reach.reason)
            return DashboardNight(block=block, status=reach.status, message=reach.reason, base_url=reach.base_url)
        await ensure_dashboard_limits_task(block, settings.concurrency)
        return await dashboard_night_task(block, deployment, parameters, (environment or {}).get(block, {}),
                                          root / block, reach.base_url, lock_wait_seconds)

    nights = await asyncio.gather(*(night(block) for block in blocks))
    estate = Estate(run_id=run_id, started_at=started, dry_run=dry_run, nights=list(nights))
    await report_estate_task(estate, root / ESTATE_DIR / run_id, mail)
    if estate.problems:
        done = len(blocks) - len(estate.problems)
        return Failed(message=f"{done} of {len(blocks)} dashboards completed; " + "; ".join(estate.problems),
                      data=estate)
    return estate
