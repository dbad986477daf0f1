"""Step 1 as tasks: sync the selected sites (`fleet.engine.sync`), and read MainWP's limits on its calls to child
sites (`fleet.engine.child_limits`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from fleet.engine.child_limits import read_child_slots
from fleet.engine.sync import sync_sites
from fleet.model.settings import PipelineSettings
from fleet.pacing.call_sizing import CallSizer
from fleet.pacing.child_slots import ChildSlots
from fleet.pacing.progress import NightProgress
from fleet.rules.plan import SiteRecord
from fleet.rules.sync_failures import SyncFailures
from orchestration.call_gate import call_gate
from orchestration.progress import step_logger
from orchestration.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


@task(name="sync-sites", **STEP_OPTIONS)
async def sync_sites_task(
    client: DashboardClient,
    sites: list[SiteRecord],
    settings: PipelineSettings,
    sizer: CallSizer | None = None,
    progress: NightProgress | None = None,
) -> SyncFailures:
    """`sync_sites`, each call through this run's gate."""
    return await sync_sites(client, sites, settings, sizer, progress, gate=call_gate())


@task(name="read-child-limits", **STEP_OPTIONS)
async def read_child_slots_task(client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings
                                ) -> ChildSlots:
    """`read_child_slots`, said in this run's log."""
    return await read_child_slots(client, sites, settings, step_logger())
