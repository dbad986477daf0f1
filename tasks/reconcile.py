"""Step 9 as a task: re-sync the sites that were worked on, list their updates again, and give every item one outcome.

Each lane re-syncs its sites (`sync_sites_task`), lists them again (`detect_updates_task`) and reconciles here;
the outcomes come from `fleet.rules.reconcile`, which trusts only that fresh state. The task is async, like the
flows: a sync task run inside an async flow opens a Prefect client (and a TLS context) of its own.
"""

from __future__ import annotations

from prefect import task

from fleet.model.summary import Item
from fleet.rules.execution import CallResult, JobOutcome
from fleet.rules.plan import DetectedUpdate, PlanItem, SiteRecord
from fleet.rules.reconcile import reconcile_lane
from fleet.rules.sync_failures import SyncFailures
from orchestration.retries import STEP_OPTIONS


@task(name="reconcile", **STEP_OPTIONS)
async def reconcile_task(
    items: list[PlanItem],
    sites: list[SiteRecord],
    calls: list[CallResult],
    jobs: list[JobOutcome],
    resync_failures: SyncFailures,
    after: list[DetectedUpdate],
) -> list[Item]:
    """`reconcile_lane`: every item of a lane with one outcome."""
    return reconcile_lane(items, sites, calls, jobs, resync_failures, after)
