"""After a write whose answer was lost (the gateway's 504, a timeout, a dropped connection): the dashboard may
still be doing the work, so the night reads the sites until they are quiet instead of sending it again."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple

from dashboard.errors import DashboardError
from fleet.model.settings import PipelineSettings
from fleet.model.vocabulary import count
from fleet.pacing.call_sizing import CallSizer, Operation
from fleet.pacing.fan_out import fan_out
from fleet.pacing.progress import Log, heartbeat
from fleet.pacing.quiet import Quiet, wait_until_quiet
from fleet.rules.plan import SiteRecord
from fleet.rules.sync_failures import SyncFailure, SyncFailures

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

PendingState = frozenset[tuple[int, str, str, str]]


async def wait_for_quiet_sites(
    client: DashboardClient,
    site_ids: list[int],
    operation: Operation,
    sizer: CallSizer,
    settings: PipelineSettings,
    log: Log,
    landed: set[tuple[int, str, str, str]] | None = None,
) -> Quiet[PendingState]:
    """Read the sites' pending updates until they stop moving (or the `landed` updates, (site, type, slug,
    version), are all gone), within `FLEET_QUIET_WAIT_SECONDS`."""

    async def read() -> PendingState:
        return frozenset((u.site_id, u.type.value, u.slug, u.current_version or "")
                         for u in await client.list_updates(include=site_ids))

    def all_landed(state: PendingState) -> bool:
        return bool(landed) and not (landed & state)

    async with heartbeat(log, lambda: f"{operation} on {count(len(site_ids), 'site')} {site_ids} to go quiet after "
                                      "a lost answer",
                         settings.progress_seconds):
        return await wait_until_quiet(read, settle=sizer.settle_seconds(operation, site_ids),
                                      bound=settings.quiet_wait, done=all_landed)


class SyncReading(NamedTuple):
    """One site as read after a sync whose answer was lost."""

    site_id: int
    last_sync: datetime | None
    sync_errors: str = ""
    unreadable: str | None = None  # why the read itself failed


async def settle_lost_sync(
    client: DashboardClient,
    sites: list[SiteRecord],
    sizer: CallSizer,
    settings: PipelineSettings,
    log: Log,
) -> SyncFailures:
    """Read each site until the dashboard shows it synced (its last sync moved) or failed (its `sync_errors`),
    as MainWP records one or the other when it reaches the site.

    Returns the failures, so that an unreachable site is skipped tonight rather than sent updates that must
    fail; a site still showing neither when the sites stop moving, or after `FLEET_QUIET_WAIT_SECONDS`, is
    reported unknown. Only the sites not yet settled are read again.
    """
    before = {site.id: site.last_sync for site in sites}

    async def read_one(site_id: int) -> SyncReading:
        try:
            site = await client.get_site(site_id)
        except DashboardError as error:
            return SyncReading(site_id, None, unreadable=str(error))
        synced = site.last_sync.replace(tzinfo=site.last_sync.tzinfo or UTC) if site.last_sync else None
        return SyncReading(site_id, synced, site.sync_errors or "")

    def settled(reading: SyncReading) -> bool:
        moved = reading.last_sync is not None and reading.last_sync != before[reading.site_id]
        return bool(reading.sync_errors) or moved

    latest: dict[int, SyncReading] = {}

    async def read() -> tuple[SyncReading, ...]:
        waiting = [site_id for site_id in before if site_id not in latest or not settled(latest[site_id])]
        for reading in await fan_out(waiting, read_one, settings.concurrency):
            latest[reading.site_id] = reading
        return tuple(latest[site_id] for site_id in before)

    site_ids = list(before)
    async with heartbeat(log, lambda: f"sync of {count(len(site_ids), 'site')} {site_ids}: reading the sites after "
                                      "a lost answer",
                         settings.progress_seconds):
        quiet = await wait_until_quiet(read, settle=sizer.settle_seconds(Operation.sync, site_ids),
                                       bound=settings.quiet_wait, done=lambda state: all(map(settled, state)))
    failures: SyncFailures = {}
    for reading in quiet.state:
        if reading.sync_errors:
            failures[reading.site_id] = SyncFailure("sync_failed", f"{reading.sync_errors} (read from the site "
                                                    "after the sync's answer was lost)")
        elif reading.unreadable:
            failures[reading.site_id] = SyncFailure("sync_unknown", "the sync's answer was lost and the site could "
                                                    f"not be read: {reading.unreadable}")
        elif not settled(reading):
            failures[reading.site_id] = SyncFailure("sync_unknown", "the sync's answer was lost and the dashboard "
                                                    f"had not synced the site after {quiet.waited:.0f}s")
    return failures
