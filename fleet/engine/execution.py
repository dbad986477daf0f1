"""Step 6: apply one update type, only the planned slugs per site, in calls sized by time, re-using any job
already running for them.

Sites are grouped so that every site of a call plans exactly the call's slugs (the dashboard applies one
slug filter to all of them, and its queued jobs ignore the ignore lists); the night's `CallSizer` cuts each
group into calls that fit the budget. Every call is journalled before it is sent, and each queued job the
moment its id is known, so a retried task or a re-run waits on it instead of starting it again, and a run
killed mid-call is accounted for by the next one.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fleet.engine.batch_calls import BatchCall, CallGate, send_batch_calls
from fleet.engine.lost_answers import wait_for_quiet_sites
from fleet.model.settings import PipelineSettings
from fleet.model.summary import UpdateType
from fleet.model.vocabulary import count
from fleet.pacing.call_sizing import CallSizer, Operation
from fleet.pacing.progress import NightProgress, Tally, heartbeat
from fleet.rules.execution import (
    CallResult,
    ItemReport,
    UpdateCall,
    reports_from_run,
    reports_from_site_route,
    sized_groups,
)
from fleet.rules.plan import PlanItem
from fleet.rules.site_errors import SiteErrorIndex, error_message
from fleet.state.job_journal import JobJournal, JournalEntry, reuse_running_jobs

if TYPE_CHECKING:
    from dashboard.client import DashboardClient
    from fleet.rules.plan import SiteRecord


async def execute_updates(
    client: DashboardClient,
    items: list[PlanItem],
    type_: UpdateType,
    sites: list[SiteRecord],
    run_id: str,
    settings: PipelineSettings,
    untouchable: dict[int, list[str]] | None = None,
    sizer: CallSizer | None = None,
    progress: NightProgress | None = None,
    *,
    gate: CallGate = CallGate(),
) -> list[CallResult]:
    """Send the update calls of one type, sized by time; queued jobs come back with their id for the sensor.

    `untouchable`: per site, the slugs of this type it has pending or ignored that are not planned. Every call
    is journalled before it is sent; a call whose answer was lost is never sent again: its sites are waited on
    until quiet, and reconcile reads what landed. Each call passes the run's `gate`, an update call holding one of
    its write slots.
    """
    sizer = sizer or settings.call_sizer()
    journal = JobJournal(settings.state_path)
    reused, remaining = reuse_running_jobs([item for item in items if item.type is type_], type_, journal)
    logger = gate.log
    for call in reused:
        logger.info("%s update job %s, started earlier, covers %s: waiting on it (fleet dashboard job %s)",
                    type_.value, call.job_id, count(len(call.call.site_ids), "site"), call.job_id)
    versions = {(item.site_id, item.slug): (item.from_version or "", item.to_version or "") for item in remaining}
    tally = Tally(total=len(remaining))

    def update_call(sent: BatchCall) -> UpdateCall:
        _, per_site = sent.key
        # run-updates-v1 does not filter translations by slug: a part of a slow site's translations goes
        # through the per-site route, which updates only the named ones (parts never share a call)
        per_site = per_site or (type_ is UpdateType.translation and sent.work[0].part)
        slugs = sorted({slug for part in sent.work for slug in part.slugs})
        return UpdateCall(type=type_, site_ids=sent.site_ids, slugs=slugs, per_site=per_site)

    async def send(sent: BatchCall) -> object:
        call = update_call(sent)
        planned = [(part.site_id, slug, *versions[(part.site_id, slug)]) for part in sent.work for slug in part.slugs]
        sent.intent = (journal.intend(run_id, "update", type_, planned), planned)
        limit = gate.write_slot(settings.concurrency_limit) if settings.concurrency_limit else contextlib.nullcontext()
        async with limit:
            if call.per_site:
                return await client.update_site_items(call.site_ids[0], call.type, call.slugs)
            return await client.run_updates(call.site_ids, [call.type], call.slugs)

    async def read(sent: BatchCall) -> CallResult:
        call = update_call(sent)
        intent, planned = sent.intent
        if sent.lost is not None:
            logger.warning("%s update of %s %s: %s; not sent again, waiting for the sites to be quiet",
                           type_.value, count(len(sent.site_ids), "site"), sent.site_ids, sent.lost)
            landed = {(site_id, type_.value, slug, version) for site_id, slug, version, _ in planned}
            quiet = await wait_for_quiet_sites(client, sent.site_ids, Operation.update_item, sizer, settings, logger,
                                               landed)
            journal.answered(intent)
            return CallResult(call=call, lost=str(sent.lost), quiet=quiet.quiet)
        journal.answered(intent)
        if sent.error is not None:  # this call's items are reconciled and carry the error
            return CallResult(call=call, error=str(sent.error))
        if call.per_site:
            return CallResult(call=call, reports=reports_from_site_route(call.site_ids[0], sent.answer))
        refused = [ItemReport(site_id=site_id, ok=False, message=error_message(error.code, error.message))
                   for site_id, error in sent.refused]
        if sent.job_id:
            journal.record(JournalEntry(job_id=sent.job_id, run_id=run_id, kind="update", type=call.type,
                                        started_at=datetime.now(UTC), site_ids=call.site_ids, slugs=call.slugs))
            return CallResult(call=call, job_id=sent.job_id, reports=refused)
        return CallResult(call=call, reports=refused + (reports_from_run(sent.answer.result)
                                                        if sent.answer.result else []))

    def applied(units: int) -> None:
        tally.add(units)
        if progress is not None:
            progress.add(progress.applied, units)

    groups = sized_groups(remaining, type_, untouchable)
    try:
        async with heartbeat(logger, lambda: f"{type_.value} updates: {tally.describe('items')}",
                             settings.progress_seconds):
            sent = await send_batch_calls(client, sizer, Operation.update_item, groups, send, read, settings,
                                          SiteErrorIndex(sites), f"{type_.value} update", wait_for_jobs=False,
                                          keep_errors=True, on_done=applied, gate=gate)
    finally:  # the answers read are written down, also when the run stops here (`fleet serve` stopping)
        journal.close()
    return reused + [call.result for call in sent]
