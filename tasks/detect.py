"""Step 2: the fleet as the dashboard knows it, and the updates it offers for the selected sites."""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version
from prefect import task

from dashboard import models
from fleet.model.summary import Client
from fleet.pacing.fan_out import chunked, fan_out
from fleet.rules.plan import PendingUpdate, SiteRecord, SiteStatus, status_for_error
from tasks.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

MINIMUM_CHILD_VERSION = Version("4.0.0")  # the dashboard refuses updates on older child plugins
INCLUDE_LIMIT = 100  # site ids per list request (they travel in the query string)


def child_too_old(version: str | None) -> bool:
    try:
        return version is not None and Version(version) < MINIMUM_CHILD_VERSION
    except InvalidVersion:
        return False


def site_record(site: models.Site, client_names: dict[int, str]) -> SiteRecord:
    """A dashboard site as the plan sees it; whether it is usable tonight is settled after the sync."""
    status, reason = SiteStatus.online, None
    if site.suspended or site.status == "suspended":
        status, reason = SiteStatus.suspended, "site is suspended on the dashboard"
    elif child_too_old(site.child_version):
        status, reason = SiteStatus.child_too_old, f"child plugin {site.child_version} is older than 4.0.0"
    return SiteRecord(
        id=site.id,
        url=site.url,
        name=site.name or site.url,
        client=client_names.get(site.client_id) if site.client_id else None,
        tags=sorted(site.tags.values()),
        status=status,
        status_reason=reason,
        last_sync=site.last_sync.replace(tzinfo=site.last_sync.tzinfo or UTC) if site.last_sync else None,
    )


async def load_fleet(client: DashboardClient) -> tuple[list[SiteRecord], list[Client]]:
    clients = await client.list_clients()
    names = {entry.id: entry.name for entry in clients}
    sites = [site_record(site, names) for site in await client.list_sites()]
    return sites, [Client(name=entry.name, email=entry.email) for entry in clients]


def apply_sync_failures(sites: list[SiteRecord], failures: dict[int, tuple[str, str]]) -> list[SiteRecord]:
    """Mark the sites whose sync failed as offline, disconnected or too old, with the dashboard's message."""
    updated = []
    for site in sites:
        if site.status is SiteStatus.online and site.id in failures:
            code, message = failures[site.id]
            status, reason = status_for_error(code), f"sync failed: {message}"
            site = site.model_copy(update={"status": status, "status_reason": reason})
        updated.append(site)
    return updated


def pending_update(update: models.PendingUpdate) -> PendingUpdate:
    """A listed update; an empty version is unknown (language packs are listed without a target version)."""
    return PendingUpdate(
        site_id=update.site_id,
        type=update.type,
        slug=update.slug,
        name=update.name,
        from_version=update.current_version or None,
        to_version=update.new_version or None,
    )


async def detect_updates(client: DashboardClient, site_ids: list[int], concurrency: int = 4) -> list[PendingUpdate]:
    """Pending updates of the given sites (the dashboard leaves ignored ones out of this list).

    Read in slices of at most `INCLUDE_LIMIT` sites, several at once: each answer then covers only its sites
    instead of every page walking the whole fleet.
    """
    wanted = set(site_ids)
    slices = chunked(sorted(wanted), INCLUDE_LIMIT)
    listed = await fan_out(slices, lambda ids: client.list_updates(include=ids), concurrency)
    return [pending_update(update) for part in listed for update in part if update.site_id in wanted]


@task(name="load-fleet", **STEP_OPTIONS)
async def load_fleet_task(client: DashboardClient) -> tuple[list[SiteRecord], list[Client]]:
    return await load_fleet(client)


@task(name="detect-updates", task_run_name="detect-{label}", **STEP_OPTIONS)
async def detect_updates_task(
    client: DashboardClient, site_ids: list[int], concurrency: int = 4, label: str = "all"
) -> list[PendingUpdate]:
    return await detect_updates(client, site_ids, concurrency)
