"""The fan-outs over many dashboards, each dashboard's run on whichever worker picks it up.

`maintain_dashboards`, the night: which dashboards -> does each answer -> its own limits -> one
`nightly-maintenance` flow run per dashboard on the work pool, side by side, each waited for -> one estate -> the
combined report.

`patch_dashboards`, between nights: which dashboards -> does each answer -> its own limits -> one `security-patch`
flow run per dashboard on the work pool, side by side (each reports its own fixes).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.states import Failed, State
from prefect_email import EmailServerCredentials

from fleet.engine.dashboard_reach import Reach
from fleet.engine.estate import DashboardNight, Estate, NightStatus
from fleet.engine.night import pipeline_settings
from fleet.model.summary import Selection
from fleet.model.vocabulary import count
from flows.parameters import (
    DashboardDeployment,
    DashboardEnvironments,
    DashboardNames,
    DryRun,
    FleetSelection,
    LockWaitSeconds,
    PolicyFile,
    ReportDir,
    SavedEmailServer,
    SendReport,
)
from flows.update import run_identity
from reporting.settings import MailSettings
from tasks.dashboards import (
    dashboard_run_task,
    ensure_dashboard_limits_task,
    reach_dashboard_task,
    saved_dashboards_task,
)
from tasks.estate import report_estate_task

NIGHT_DEPLOYMENT = "nightly-maintenance/dashboard-night"
SECURITY_DEPLOYMENT = "security-patch/dashboard-security"
ESTATE_DIR = "estate"


def night_parameters(
    selection: Selection, dry_run: bool, policy_file: str, send_report: bool, email: EmailServerCredentials | None
) -> dict[str, object]:
    """The parameters of every dashboard's night (the e-mail block goes as a reference to the same saved block)."""
    parameters: dict[str, object] = {"selection": selection.model_dump(mode="json"), "dry_run": dry_run,
                                     "policy_file": policy_file, "send_report": send_report}
    return {**parameters, **email_parameter(email)}


def email_parameter(email: EmailServerCredentials | None) -> dict[str, object]:
    """The e-mail block as a child run's parameter: a reference to the same saved block (none: nothing)."""
    if email is None:
        return {}
    return {"email_block": email.model_dump(context={"serialize_blocks_as_references": True})}


async def saved_blocks(dashboards: list[str] | None) -> list[str]:
    """The dashboards named, or every saved one; none at all is a mistake said plainly."""
    blocks = list(dict.fromkeys(dashboards or await saved_dashboards_task()))
    if not blocks:
        raise ValueError("no saved Dashboard Connection blocks: save one (`fleet blocks save --dashboard NAME`)")
    return blocks


async def reached(block: str, slots: int) -> DashboardNight | Reach:
    """The dashboard, once it answered and its limits exist; or why it gets no run."""
    reach = await reach_dashboard_task(block)
    if reach.status is not None:
        get_run_logger().warning("dashboard %s: %s: %s", block, reach.status.value, reach.reason)
        return DashboardNight(block=block, status=reach.status, message=reach.reason, base_url=reach.base_url)
    await ensure_dashboard_limits_task(block, slots)
    return reach


async def run_on_each(blocks: list[str], deployment: str, parameters: dict[str, object],
                      environment: dict[str, dict[str, str]] | None, root: Path, slots: int, *, kind: str,
                      lock_wait_seconds: float | None) -> list[DashboardNight]:
    """The one fan-out of both: each dashboard that answers gets its run of `deployment` on the pool, side by
    side, each waited for; one that does not answer is said and gets none."""

    async def one(block: str) -> DashboardNight:
        reach = await reached(block, slots)
        if isinstance(reach, DashboardNight):
            return reach
        return await dashboard_run_task(block, deployment, parameters, (environment or {}).get(block, {}),
                                        root / block, reach.base_url, kind=kind, lock_wait_seconds=lock_wait_seconds)

    return list(await asyncio.gather(*(one(block) for block in blocks)))


@flow(name="maintain-dashboards", log_prints=False)
async def maintain_dashboards(
    dashboards: DashboardNames = None,
    selection: FleetSelection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dry_run: DryRun = False,
    policy_file: PolicyFile = "",
    report_dir: ReportDir = "",
    send_report: SendReport = True,
    email_block: SavedEmailServer = None,
    environment: DashboardEnvironments = None,
    deployment: DashboardDeployment = NIGHT_DEPLOYMENT,
    lock_wait_seconds: LockWaitSeconds = 60.0,
) -> Estate | State:
    """Run the night of every dashboard at once, each on the work pool, and combine them into one report.

    The selection, dry run, policy file and e-mail settings go to every dashboard's night (an empty policy file:
    each worker's FLEET_POLICY_FILE). `report_dir` is a directory every worker shares: each dashboard's runs go to
    REPORT_DIR/<block>, the combined report to REPORT_DIR/estate/<run id>; a dry run's combined report is never
    sent. A dashboard whose night lock another run holds past `lock_wait_seconds` is reported busy.

    A dashboard that does not answer, or whose night fails, does not stop the others; the run then ends Failed,
    naming them, after the combined report is written (its data is the same combined result).
    """
    logger = get_run_logger()
    started = datetime.now(UTC)
    run_id = run_identity(started)
    settings = pipeline_settings(report_dir)
    mail = MailSettings.for_block(email_block) if send_report and not dry_run else None  # unusable: said now
    root = settings.report_dir.resolve()
    blocks = await saved_blocks(dashboards)
    logger.info("%s: %s", count(len(blocks), "dashboard"), ", ".join(blocks))
    parameters = night_parameters(selection, dry_run, policy_file, send_report, email_block)

    nights = await run_on_each(blocks, deployment, parameters, environment, root, settings.concurrency,
                               kind="night", lock_wait_seconds=lock_wait_seconds)
    estate = Estate(run_id=run_id, started_at=started, dry_run=dry_run, nights=nights)
    await report_estate_task(estate, root / ESTATE_DIR / run_id, mail)
    if estate.problems:
        done = len(blocks) - len(estate.problems)
        return Failed(message=f"{done} of {len(blocks)} dashboards completed; " + "; ".join(estate.problems),
                      data=estate)
    return estate


@flow(name="patch-dashboards", log_prints=False)
async def patch_dashboards(
    dashboards: DashboardNames = None,
    dry_run: DryRun = False,
    policy_file: PolicyFile = "",
    report_dir: ReportDir = "",
    send_report: SendReport = True,
    email_block: SavedEmailServer = None,
    environment: DashboardEnvironments = None,
    deployment: DashboardDeployment = SECURITY_DEPLOYMENT,
    lock_wait_seconds: LockWaitSeconds = 60.0,
) -> list[DashboardNight] | State:
    """Between nights, every dashboard's security run at once, each on the work pool: the updates that fix a known
    vulnerability at or above the policy's threshold, applied now (nothing else). Each run takes its dashboard's
    night lock and leaves the fixes to a night that holds it.

    The dry run, policy file (its `security:` threshold; empty: each worker's FLEET_POLICY_FILE) and e-mail
    settings go to every dashboard's run, each reporting only when it planned fixes. `report_dir` is a directory
    every worker shares: each dashboard's runs go to REPORT_DIR/<block>, beside its nights.

    A dashboard that does not answer, or whose run fails, does not stop the others; the run then ends Failed,
    naming them.
    """
    settings = pipeline_settings(report_dir)
    root = settings.report_dir.resolve()
    blocks = await saved_blocks(dashboards)
    parameters = {"dry_run": dry_run, "policy_file": policy_file, "send_report": send_report,
                  "lock_wait_seconds": lock_wait_seconds, **email_parameter(email_block)}

    runs = await run_on_each(blocks, deployment, parameters, environment, root, settings.concurrency,
                             kind="security", lock_wait_seconds=None)  # each run takes its lock itself
    problems = [f"{run.block}: {run.status.value}" + (f" ({run.message})" if run.message else "")
                for run in runs if run.status is not NightStatus.completed]
    if problems:
        return Failed(message=f"{len(runs) - len(problems)} of {len(runs)} dashboards' security runs completed; "
                              + "; ".join(problems), data=runs)
    return runs
