"""Step 9: re-sync the sites that were worked on, list their updates again, and give every item one outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from fleet.execution import CallResult, JobOutcome
from fleet.plan import PlanItem, SiteRecord
from fleet.reconcile import reconcile
from fleet.settings import PipelineSettings
from fleet.summary import Item
from tasks.detect import detect_updates
from tasks.retries import STEP_OPTIONS
from tasks.sync import sync_sites

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


async def reconcile_items(
    client: DashboardClient,
    items: list[PlanItem],
    sites: list[SiteRecord],
    calls: list[CallResult],
    jobs: list[JobOutcome],
    settings: PipelineSettings,
) -> list[Item]:
    worked_on = sorted({item.site_id for item in items})
    by_id = {site.id: site for site in sites}
    failures = await sync_sites(client, [by_id[site_id] for site_id in worked_on], settings)
    after = await detect_updates(client, worked_on)
    resync_errors = {site_id: message for site_id, (_, message) in failures.items()}
    return reconcile(items, by_id, calls, jobs, resync_errors, after)


@task(name="reconcile", task_run_name="reconcile-{label}", **STEP_OPTIONS)
async def reconcile_items_task(
    client: DashboardClient,
    items: list[PlanItem],
    sites: list[SiteRecord],
    calls: list[CallResult],
    jobs: list[JobOutcome],
    settings: PipelineSettings,
    label: str = "all",
) -> list[Item]:
    return await reconcile_items(client, items, sites, calls, jobs, settings)
