"""Step 1: sync the selected sites, so that everything after works on what the sites report tonight."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.engine.batch_calls import BatchCall, CallGate, send_batch_calls
from fleet.engine.lost_answers import settle_lost_sync
from fleet.model.settings import PipelineSettings
from fleet.model.vocabulary import count
from fleet.pacing.call_sizing import CallSizer, Operation, Work
from fleet.pacing.progress import NightProgress, Tally, heartbeat
from fleet.rules.plan import SiteRecord
from fleet.rules.site_errors import SiteErrorIndex, error_message
from fleet.rules.sync_failures import SyncFailure, SyncFailures

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


async def sync_sites(
    client: DashboardClient,
    sites: list[SiteRecord],
    settings: PipelineSettings,
    sizer: CallSizer | None = None,
    progress: NightProgress | None = None,
    *,
    gate: CallGate = CallGate(),
) -> SyncFailures:
    """Sync the sites in calls sized by time; return the failures by site id.

    Immediate calls are preferred (they answer per site); a call the dashboard queues anyway is waited on. A
    call whose answer was lost is never sent again: its sites are read until each shows synced or failed. Each
    call passes the run's `gate`.
    """
    sizer = sizer or settings.call_sizer()
    by_id = {site.id: site for site in sites}
    failures: SyncFailures = {}
    logger = gate.log
    tally = Tally(total=len(sites))

    async def send(call: BatchCall) -> object:
        return await client.sync_sites(call.site_ids)

    async def read(call: BatchCall) -> None:
        if call.lost is not None:
            logger.warning("sync of %s %s: %s; not sent again, waiting for the sites to be quiet",
                           count(len(call.site_ids), "site"), call.site_ids, call.lost)
            failures.update(await settle_lost_sync(client, [by_id[site_id] for site_id in call.site_ids], sizer,
                                                   settings, logger))
            return
        for site_id, error in call.refused + call.failed:
            failures[site_id] = SyncFailure(error.code, error_message(error.code, error.message))
        if call.job is not None:
            for report in call.job.reports:
                failures[report.site_id] = SyncFailure("sync_failed", report.message or "sync failed")
            if not call.job.finished:
                for site_id in call.site_ids:
                    failures.setdefault(site_id, SyncFailure("sync_unfinished",
                                                             f"sync job {call.job_id}: {call.job.job.reason}"))

    def synced(units: int) -> None:
        tally.add(units)
        if progress is not None:
            progress.add(progress.synced, units)

    async with heartbeat(logger, lambda: f"sync: {tally.describe('sites')}", settings.progress_seconds):
        await send_batch_calls(client, sizer, Operation.sync, {None: [Work(site.id) for site in sites]}, send, read,
                               settings, SiteErrorIndex(sites), "sync", on_done=synced, gate=gate)
    return failures
