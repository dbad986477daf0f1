"""Each dashboard's run as a flow run of a deployment on the work pool (run by whichever worker picks it up), and
what it did, read from its final state and its summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.runtime import flow_run

from dashboard.block import DashboardConnection
from fleet.engine.estate import DashboardNight, NightStatus, read_night, write_limit_name
from fleet.model.settings import STATE_FILE
from fleet.pacing.progress import Log
from fleet.state.dashboard_memory import DashboardMemory
from fleet.state.night_lock import NightBusy
from orchestration.limits import night_lock


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


async def run_dashboard(block: str, deployment: str, parameters: dict[str, Any], environment: dict[str, str],
                        report_dir: Path, base_url: str | None, *, lock_wait_seconds: float | None,
                        log: Log) -> DashboardNight:
    """One run of this dashboard (`start_dashboard_run`), waited for. A night (`lock_wait_seconds`) is waited for
    holding the dashboard's night lock; a security run (None) takes the lock itself and leaves the fixes to a night
    that holds it, and writes no summary when it found no fix to apply."""
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
    log.info("dashboard %s: %s (flow run %s)", block, done, child.name)
    return run
