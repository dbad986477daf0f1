"""Step 2: the fleet as the dashboard knows it, and the updates it offers for the selected sites."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from fleet.model.summary import ReportClient
from fleet.pacing.fan_out import chunked, fan_out
from fleet.rules.dashboard_records import pending_update, site_record
from fleet.rules.plan import DetectedUpdate, SiteRecord
from tasks.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

INCLUDE_LIMIT = 100  # site ids per list request (they travel in the query string)


async def load_fleet(client: DashboardClient) -> tuple[list[SiteRecord], list[ReportClient]]:
    clients = await client.list_clients()
    names = {entry.id: entry.name for entry in clients}
    sites = [site_record(site, names) for site in await client.list_sites()]
    return sites, [ReportClient(name=entry.name, email=entry.email) for entry in clients]


async def detect_updates(client: DashboardClient, site_ids: list[int], concurrency: int = 4) -> list[DetectedUpdate]:
    """Pending updates of the given sites (the dashboard leaves ignored ones out of this list).

    Read in slices of at most `INCLUDE_LIMIT` sites, several at once: each answer then covers only its sites
    instead of every page walking the whole fleet.
    """
    wanted = set(site_ids)
    slices = chunked(sorted(wanted), INCLUDE_LIMIT)
    listed = await fan_out(slices, lambda ids: client.list_updates(include=ids), concurrency)
    return [pending_update(update) for part in listed for update in part if update.site_id in wanted]


load_fleet_task = task(load_fleet, name="load-fleet", **STEP_OPTIONS)
detect_updates_task = task(detect_updates, name="detect-updates", **STEP_OPTIONS)
