"""Step 6 as a task: apply one update type in calls sized by time (`fleet.engine.execution`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from fleet.engine.execution import execute_updates
from fleet.model.settings import PipelineSettings
from fleet.model.summary import UpdateType
from fleet.pacing.call_sizing import CallSizer
from fleet.pacing.progress import NightProgress
from fleet.rules.execution import CallResult
from fleet.rules.plan import PlanItem, SiteRecord
from orchestration.call_gate import call_gate
from orchestration.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


@task(name="execute-updates", **STEP_OPTIONS)
async def execute_updates_task(
    client: DashboardClient,
    items: list[PlanItem],
    type_: UpdateType,
    sites: list[SiteRecord],
    run_id: str,
    settings: PipelineSettings,
    untouchable: dict[int, list[str]] | None = None,
    sizer: CallSizer | None = None,
    progress: NightProgress | None = None,
) -> list[CallResult]:
    """`execute_updates`, each call through this run's gate (its write slots taken from the dashboard's limit)."""
    return await execute_updates(client, items, type_, sites, run_id, settings, untouchable, sizer, progress,
                                 gate=call_gate())
