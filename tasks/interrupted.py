"""Before and after tonight's survey, as tasks: the runs that were killed mid-run (`fleet.engine.interrupted_runs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from fleet.engine.containment import TonightsBreaks
from fleet.engine.interrupted import Accounting
from fleet.engine.interrupted_runs import account_interrupted_runs, wait_for_interrupted_runs
from fleet.model.settings import PipelineSettings
from fleet.pacing.call_sizing import CallSizer
from fleet.rules.plan import DetectedUpdate, SiteRecord
from fleet.rules.policy import Policy
from fleet.state.job_journal import OpenRun
from orchestration.call_gate import call_gate
from orchestration.limits import mark_crashed
from orchestration.night_alerts import NightOutbox
from orchestration.progress import step_logger
from orchestration.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


@task(name="wait-for-interrupted-runs", **STEP_OPTIONS)
async def wait_for_interrupted_runs_task(
    client: DashboardClient, runs: list[OpenRun], sizer: CallSizer, settings: PipelineSettings, run_id: str
) -> None:
    """`wait_for_interrupted_runs`, their flow runs marked crashed on this run's Prefect server."""
    await wait_for_interrupted_runs(client, runs, sizer, settings, run_id, mark_crashed=mark_crashed,
                                    log=step_logger())


@task(name="account-interrupted-runs", **STEP_OPTIONS)
async def account_interrupted_runs_task(
    client: DashboardClient,
    runs: list[OpenRun],
    sites: list[SiteRecord],
    pending: list[DetectedUpdate],
    sizer: CallSizer,
    settings: PipelineSettings,
    breaks: TonightsBreaks | None = None,
    policy: Policy | None = None,
    run_id: str = "",
) -> Accounting:
    """`account_interrupted_runs`, its calls through this run's gate and its breaks told through its outbox."""
    return await account_interrupted_runs(client, runs, sites, pending, sizer, settings, breaks, policy, run_id,
                                          gate=call_gate(), outbox=NightOutbox())
