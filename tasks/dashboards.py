"""The fan-out's steps as tasks: which dashboards are saved, whether each one answers
(`fleet.engine.dashboard_reach`), and each one's night as a flow run of a deployment on the work pool
(`orchestration.dashboard_runs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.client.orchestration import get_client

from dashboard.block import DashboardConnection
from fleet.engine.dashboard_reach import Reach, reach_dashboard
from fleet.engine.estate import DashboardNight, NightStatus, write_limit_name
from orchestration.dashboard_runs import run_dashboard
from orchestration.limits import ensure_concurrency_limit


@task(name="saved-dashboards")
async def saved_dashboards_task() -> list[str]:
    """The names of every saved Dashboard Connection block."""
    async with get_client() as client:
        documents = await client.read_block_documents_by_type(
            DashboardConnection.get_block_type_slug(), include_secrets=False
        )
    return sorted(document.name for document in documents if document.name and not document.is_anonymous)


@task(name="dashboard-limits", task_run_name="limits-{block}")
async def ensure_dashboard_limits_task(block: str, slots: int) -> None:
    """The dashboard's own write budget: `slots` calls in flight."""
    await ensure_concurrency_limit(write_limit_name(block), slots)


@task(name="reach-dashboard", task_run_name="reach-{block}")
async def reach_dashboard_task(block: str) -> Reach:
    """Load the block and ask the dashboard for its site count: an unreachable dashboard gets no night."""
    try:
        connection = await DashboardConnection.load(block)
    except ValueError as error:  # Prefect: no block document with that name
        return Reach(block, status=NightStatus.not_started, reason=f"no saved Dashboard Connection {block!r}: {error}")
    return await reach_dashboard(block, connection)


@task(name="dashboard-run", task_run_name="{kind}-{block}")
async def dashboard_run_task(
    block: str,
    deployment: str,
    parameters: dict[str, Any],
    environment: dict[str, str],
    report_dir: Path,
    base_url: str | None,
    *,
    kind: str,
    lock_wait_seconds: float | None,
) -> DashboardNight:
    """One run of this dashboard on the work pool, waited for (`run_dashboard`), said in this run's log."""
    return await run_dashboard(block, deployment, parameters, environment, report_dir, base_url,
                               lock_wait_seconds=lock_wait_seconds, log=get_run_logger())
