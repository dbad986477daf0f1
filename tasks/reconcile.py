"""Step 9: re-sync the sites that were worked on, list their updates again, and give every item one outcome.

The re-sync runs per chunk of sites (`sync_sites_task`), the fresh list is read once for all of them, and
the outcomes come from `fleet.reconcile`, which trusts only that fresh state.
"""

from __future__ import annotations

from prefect import task

from fleet.execution import CallResult, JobOutcome
from fleet.plan import PendingUpdate, PlanItem, SiteRecord
from fleet.reconcile import reconcile
from fleet.summary import Item
from tasks.retries import STEP_OPTIONS


@task(name="reconcile", **STEP_OPTIONS)
def reconcile_task(
    items: list[PlanItem],
    sites: list[SiteRecord],
    calls: list[CallResult],
    jobs: list[JobOutcome],
    resync_failures: dict[int, tuple[str, str]],
    after: list[PendingUpdate],
) -> list[Item]:
    resync_errors = {site_id: message for site_id, (_, message) in resync_failures.items()}
    return reconcile(items, {site.id: site for site in sites}, calls, jobs, resync_errors, after)
