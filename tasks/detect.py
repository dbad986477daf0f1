"""Step 2: the fleet as the dashboard knows it, and the updates it offers for the selected sites."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from prefect import task

from dashboard.errors import DashboardError
from dashboard.models import UpdateType
from fleet.model.summary import ReportClient
from fleet.pacing.fan_out import chunked, fan_out
from fleet.rules.dashboard_records import pending_update, site_record
from fleet.rules.plan import DetectedUpdate, SiteRecord
from tasks.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

INCLUDE_LIMIT = 100  # site ids per list request (they travel in the query string)
ROLLED_BACK_TYPES = (UpdateType.plugin, UpdateType.theme)  # WordPress rolls back only these
log = logging.getLogger("fleet.detect")


async def load_fleet(client: DashboardClient) -> tuple[list[SiteRecord], list[ReportClient]]:
    clients = await client.list_clients()
    names = {entry.id: entry.name for entry in clients}
    sites = [site_record(site, names) for site in await client.list_sites()]
    return sites, [ReportClient(name=entry.name, email=entry.email) for entry in clients]


async def detect_updates(
    client: DashboardClient, site_ids: list[int], concurrency: int = 4, rollbacks: bool = False
) -> list[DetectedUpdate]:
    """Pending updates of the given sites (the dashboard leaves ignored ones out of this list); with `rollbacks`,
    those MainWP remembers WordPress rolled back marked (the plan holds them; a re-list to reconcile needs not).

    Read in slices of at most `INCLUDE_LIMIT` sites, several at once: each answer then covers only its sites
    instead of every page walking the whole fleet.
    """
    wanted = set(site_ids)
    slices = chunked(sorted(wanted), INCLUDE_LIMIT)
    listed = await fan_out(slices, lambda ids: client.list_updates(include=ids), concurrency)
    pending = [pending_update(update) for part in listed for update in part if update.site_id in wanted]
    return await mark_rolled_back(client, pending, concurrency) if rollbacks else pending


async def mark_rolled_back(client: DashboardClient, pending: list[DetectedUpdate],
                           concurrency: int) -> list[DetectedUpdate]:
    """`rolled_back` on each offered plugin or theme version MainWP remembers WordPress rolled back on its site
    (one read of the site's update detail per site offered a plugin or theme; a read that fails only warns)."""
    asked = sorted({update.site_id for update in pending if update.type in ROLLED_BACK_TYPES})

    async def read(site_id: int) -> set[tuple[int, UpdateType, str, str]]:
        try:
            found = await client.rolled_back_updates(site_id)
        except DashboardError as error:
            log.warning("site %s: the versions MainWP rolled back could not be read: %s", site_id, error)
            return set()
        return {(site_id, rollback.type, rollback.slug, rollback.version or "") for rollback in found}

    remembered = set().union(*await fan_out(asked, read, concurrency)) if asked else set()
    if not remembered:
        return pending
    return [update.model_copy(update={"rolled_back": True})
            if (update.site_id, update.type, update.slug, update.to_version or "") in remembered else update
            for update in pending]


load_fleet_task = task(load_fleet, name="load-fleet", **STEP_OPTIONS)
detect_updates_task = task(detect_updates, name="detect-updates", **STEP_OPTIONS)
