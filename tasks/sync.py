"""Step 1: sync the selected sites, so that everything after works on what the sites report tonight."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple

from prefect import task

from dashboard.errors import DashboardError, OutcomeUnknown
from dashboard.models import BatchSiteError
from fleet.model.settings import PipelineSettings
from fleet.pacing.call_sizing import CallSizer, Work, send_sized
from fleet.pacing.fan_out import fan_out
from fleet.pacing.progress import NightProgress, Tally, heartbeat
from fleet.pacing.quiet import Quiet, wait_until_quiet
from fleet.rules.plan import SiteRecord
from tasks.progress import step_logger
from tasks.retries import STEP_OPTIONS
from tasks.sensor import wait_for_batch_job

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

PendingState = frozenset[tuple[int, str, str, str]]


class SiteErrorIndex:
    """Maps the identifiers batch errors carry (a site id, its URL or its domain) back to site ids."""

    def __init__(self, sites: list[SiteRecord]) -> None:
        self._ids = {}
        for site in sites:
            for key in (*site.names, site.url.lower().rstrip("/")):
                self._ids[key] = site.id

    def site_id(self, error: BatchSiteError) -> int | None:
        if error.site_id:
            return error.site_id
        for value in (error.identifier, error.site_url):
            text = (value or "").strip().lower().rstrip("/")
            if not text:
                continue
            found = self._ids.get(text) or self._ids.get(SiteRecord(id=0, url=text, name="").domain)
            if found is not None:
                return found
        return None


def describe(code: str, message: str) -> str:
    return f"{message} [{code}]" if code else message


async def wait_for_quiet_sites(
    client: DashboardClient,
    site_ids: list[int],
    operation: str,
    sizer: CallSizer,
    settings: PipelineSettings,
    landed: set[tuple[int, str, str, str]] | None = None,
) -> Quiet[PendingState]:
    """After a write whose answer was lost: read the sites' pending updates until they stop moving (or the
    `landed` updates, (site, type, slug, version), are all gone), within `FLEET_QUIET_WAIT_SECONDS`."""

    async def read() -> PendingState:
        return frozenset((u.site_id, u.type.value, u.slug, u.current_version or "")
                         for u in await client.list_updates(include=site_ids))

    def all_landed(state: PendingState) -> bool:
        return bool(landed) and not (landed & state)

    async with heartbeat(step_logger(), lambda: f"{operation} on site(s) {site_ids} to go quiet after a lost answer",
                         settings.progress_seconds):
        return await wait_until_quiet(read, settle=sizer.settle_seconds(operation, site_ids),
                                      bound=settings.quiet_wait_seconds, done=all_landed)


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
) -> dict[int, tuple[str, str]]:
    """After a sync whose answer was lost: read each site until the dashboard shows it synced (its last sync
    moved) or failed (its `sync_errors`), as MainWP records one or the other when it reaches the site.

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
    async with heartbeat(step_logger(), lambda: f"sync of site(s) {site_ids}: reading the sites after a lost answer",
                         settings.progress_seconds):
        quiet = await wait_until_quiet(read, settle=sizer.settle_seconds("sync", site_ids),
                                       bound=settings.quiet_wait_seconds, done=lambda state: all(map(settled, state)))
    failures: dict[int, tuple[str, str]] = {}
    for reading in quiet.state:
        if reading.sync_errors:
            failures[reading.site_id] = ("sync_failed", f"{reading.sync_errors} (read from the site after the "
                                         "sync's answer was lost)")
        elif reading.unreadable:
            failures[reading.site_id] = ("sync_unknown", "the sync's answer was lost and the site could not be "
                                         f"read: {reading.unreadable}")
        elif not settled(reading):
            failures[reading.site_id] = ("sync_unknown", "the sync's answer was lost and the dashboard had not "
                                         f"synced the site after {quiet.waited:.0f}s")
    return failures


async def sync_sites(
    client: DashboardClient,
    sites: list[SiteRecord],
    settings: PipelineSettings,
    sizer: CallSizer | None = None,
    progress: NightProgress | None = None,
) -> dict[int, tuple[str, str]]:
    """Sync the sites in calls sized by time; return {site id: (code, message)} of the failures.

    Immediate calls are preferred (they answer per site); a call the dashboard queues anyway is waited on. A
    call whose answer was lost is never sent again: its sites are read until each shows synced or failed.
    """
    sizer = sizer or settings.call_sizer()
    index = SiteErrorIndex(sites)
    by_id = {site.id: site for site in sites}
    failures: dict[int, tuple[str, str]] = {}
    logger = step_logger()
    tally = Tally(total=len(sites))

    async def sync_call(_: object, work: list[Work]) -> tuple[None, float | None]:
        site_ids = [part.site_id for part in work]
        try:
            start = await client.sync_sites(site_ids)
        except OutcomeUnknown as error:
            sizer.lost("sync", work)
            logger.warning("sync of site(s) %s: %s; not sent again, waiting for the sites to be quiet",
                           site_ids, error)
            failures.update(await settle_lost_sync(client, [by_id[site_id] for site_id in site_ids], sizer,
                                                   settings))
            return None, None
        for error in start.errors + (start.result.errors if start.result else []):
            site_id = index.site_id(error)
            if site_id is not None:
                failures[site_id] = (error.code, describe(error.code, error.message))
        if start.queued and start.job_id:
            logger.info("sync job %s queued for %d site(s) (follow it: fleet dashboard job %s)", start.job_id,
                        len(site_ids), start.job_id)
            outcome = await wait_for_batch_job(client, start.job_id, "sync", site_ids, settings)
            for report in outcome.reports:
                failures[report.site_id] = ("sync_failed", report.message or "sync failed")
            if not outcome.finished:
                for site_id in site_ids:
                    failures.setdefault(site_id, ("sync_unfinished", f"sync job {start.job_id}: {outcome.job.reason}"))
            return None, None
        return None, start.elapsed

    def synced(units: int) -> None:
        tally.add(units)
        if progress is not None:
            progress.add(progress.synced, units)

    async with heartbeat(logger, lambda: f"sync: {tally.describe('site(s)')}", settings.progress_seconds):
        await send_sized(sizer, "sync", {None: [Work(site.id) for site in sites]}, sync_call, settings.concurrency,
                         on_done=synced)
    return failures


@task(name="sync-sites", task_run_name="sync-{label}", **STEP_OPTIONS)
async def sync_sites_task(
    client: DashboardClient,
    sites: list[SiteRecord],
    settings: PipelineSettings,
    label: str = "chunk",
    sizer: CallSizer | None = None,
    progress: NightProgress | None = None,
) -> dict[int, tuple[str, str]]:
    return await sync_sites(client, sites, settings, sizer, progress)
