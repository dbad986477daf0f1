"""The fan-out's steps: which dashboards are saved, whether each one answers, and each one's night as a flow run
of a deployment on the work pool (run by whichever worker picks it up)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run

from dashboard.block import DashboardConnection
from dashboard.client import DashboardClient
from dashboard.errors import DashboardError, TransportError
from fleet.engine.estate import DashboardNight, NightStatus, read_night, write_limit_name
from fleet.model.settings import STATE_FILE
from fleet.state.dashboard_memory import DashboardMemory
from fleet.state.night_lock import NightBusy
from orchestration.limits import ensure_concurrency_limit, night_lock

# The first contact only asks whether the dashboard answers: two quick tries, not the night's patient retries.
REACH_OVERRIDES: dict[str, Any] = {"max_attempts": 2, "connect_timeout": 5.0, "read_timeout": 30.0, "retry_cap": 2.0}


@dataclass(frozen=True)
class Reach:
    """Whether a saved dashboard answered: its address and site count, or why not."""

    block: str
    base_url: str | None = None
    sites: int | None = None
    status: NightStatus | None = None  # unreachable or not_started when it cannot have a night
    reason: str | None = None


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
    try:
        async with DashboardClient.from_block(connection, **REACH_OVERRIDES) as client:
            sites = await client.count_sites()
    except TransportError as error:
        return Reach(block, connection.base_url, status=NightStatus.unreachable, reason=str(error))
    except DashboardError as error:  # refused credentials, a broken answer: a night would fail the same way
        return Reach(block, connection.base_url, status=NightStatus.not_started, reason=str(error))
    return Reach(block, connection.base_url, sites=sites)


async def saved_block_id(name: str) -> Any:
    """The id of a saved Dashboard Connection block (ObjectNotFound when there is none by that name)."""
    async with get_client() as client:
        document = await client.read_block_document_by_name(name, DashboardConnection.get_block_type_slug())
    return document.id


async def start_dashboard_run(
    block: str, deployment: str, parameters: dict[str, Any], environment: dict[str, str], report_dir: Path
) -> FlowRun:
    """One flow run of `deployment` for this dashboard on the work pool, waited for to its end.

    The flow run writes under `report_dir` (a path every worker shares), keeps the dashboard's memory there and
    takes its write slots from the dashboard's own global concurrency limit (`FLEET_CONCURRENCY_LIMIT` in the
    run's environment). A retried fan-out creates no second flow run: the idempotency key names the fan-out's run
    and the block. `ObjectNotFound` when there is no such block or deployment.
    """
    # each dashboard's runs keep their own memory (holds, first-seen dates, the journal) beside its runs
    env = {"FLEET_STATE_DB": str(report_dir / STATE_FILE), **environment,
           "FLEET_CONCURRENCY_LIMIT": write_limit_name(block)}
    # the flows' `dashboard` parameter is a block picker: it takes a reference to the saved block
    reference = {"$ref": {"block_document_id": str(await saved_block_id(block))}}
    return await run_deployment(
        deployment,
        parameters={**parameters, "dashboard": reference, "report_dir": str(report_dir)},
        job_variables={"env": env},
        idempotency_key=f"{flow_run.get_id()}-{block}",
        tags=["fleet-maintenance", f"dashboard:{block}"],
        timeout=None,
    )


def no_deployment(block: str, deployment: str, base_url: str | None = None) -> DashboardNight:
    return DashboardNight(block=block, status=NightStatus.not_started, base_url=base_url,
                          message=f"no deployment {deployment!r} on the Prefect server")


def dashboard_run(block: str, child: FlowRun, report_dir: Path, base_url: str | None, *,
                  summary_expected: bool = True) -> DashboardNight:
    """What a dashboard's finished flow run did, with its summary counted when it wrote one."""
    state = child.state
    completed = state is not None and state.type is StateType.COMPLETED
    return read_night(block, status=NightStatus.completed if completed else NightStatus.failed,
                      report_dir=report_dir, flow_run_id=str(child.id), flow_run_name=child.name,
                      state=state.name if state else None, message=None if completed else (
                          state.message if state else "no final state"), base_url=base_url,
                      summary_expected=summary_expected)


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
    """One run of this dashboard (`start_dashboard_run`), waited for. A night (`lock_wait_seconds`) is waited for
    holding the dashboard's night lock; a security run (None) takes the lock itself and leaves the fixes to a night
    that holds it, and writes no summary when it found no fix to apply."""
    logger = get_run_logger()
    try:
        if lock_wait_seconds is None:
            child = await start_dashboard_run(block, deployment, parameters, environment, report_dir)
        else:  # the child keeps its memory under report_dir (FLEET_STATE_DB): its lock is there too
            async with night_lock(DashboardMemory(report_dir / STATE_FILE, base_url or block), "maintain-dashboards",
                                  lock_wait_seconds):
                child = await start_dashboard_run(block, deployment, parameters, environment, report_dir)
    except NightBusy as busy:
        return DashboardNight(block=block, status=NightStatus.busy, base_url=base_url, message=str(busy))
    except ObjectNotFound:
        return no_deployment(block, deployment, base_url)
    run = dashboard_run(block, child, report_dir, base_url, summary_expected=lock_wait_seconds is not None)
    done = run.status.value
    if lock_wait_seconds is None and run.status is NightStatus.completed:
        done = f"{run.tally.updated} fix(es) applied" if run.tally else "no fix to apply"
    logger.info("dashboard %s: %s (flow run %s)", block, done, child.name)
    return run
