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

from prefect import task
from prefect.concurrency.asyncio import concurrency

from dashboard.errors import DashboardError, OutcomeUnknown
from fleet.model.settings import PipelineSettings
from fleet.model.summary import UpdateType
from fleet.pacing.call_sizing import CallSizer, Work, send_sized
from fleet.pacing.progress import NightProgress, Tally, heartbeat
from fleet.rules.execution import (
    CallResult,
    ItemReport,
    UpdateCall,
    plan_calls,
    reports_from_run,
    reports_from_site_route,
)
from fleet.rules.plan import PlanItem
from fleet.state.job_journal import JobJournal, JournalEntry
from tasks.progress import step_logger
from tasks.retries import FATAL_ERRORS, STEP_OPTIONS
from tasks.sync import SiteErrorIndex, describe, wait_for_quiet_sites

if TYPE_CHECKING:
    from dashboard.client import DashboardClient
    from fleet.rules.plan import SiteRecord


def reuse_running_jobs(
    items: list[PlanItem], type_: UpdateType, journal: JobJournal
) -> tuple[list[CallResult], list[PlanItem]]:
    """Attach items already covered by an unfinished journalled job to that job; return the rest."""
    reused, remaining = [], list(items)
    for entry in journal.open_jobs("update"):
        if entry.type is not type_:
            continue
        covered = {(site_id, slug) for site_id in entry.site_ids for slug in entry.slugs}
        mine = [item for item in remaining if (item.site_id, item.slug) in covered]
        if mine:
            sites = sorted({item.site_id for item in mine})
            reused.append(CallResult(call=UpdateCall(type=type_, site_ids=sites, slugs=entry.slugs),
                                     job_id=entry.job_id, reused=True))
            remaining = [item for item in remaining if (item.site_id, item.slug) not in covered]
    return reused, remaining


def sized_groups(
    items: list[PlanItem], type_: UpdateType, untouchable: dict[int, list[str]] | None
) -> dict[tuple[tuple[str, ...], bool], list[Work]]:
    """The safe slug filters of `plan_calls`, each with its sites' work: one unit per planned item.

    Any part of a group may be sent on its own with the union of its sites' slugs as the filter: a subset of
    a filter that touches nothing unplanned touches nothing unplanned either.
    """
    planned: dict[int, list[str]] = {}
    for item in items:
        planned.setdefault(item.site_id, []).append(item.slug)
    groups: dict[tuple[tuple[str, ...], bool], list[Work]] = {}
    for call in plan_calls(items, type_, len(planned) or 1, untouchable):
        key = (tuple(call.slugs), call.per_site)
        groups.setdefault(key, []).extend(
            Work(site_id, len(planned[site_id]), tuple(sorted(planned[site_id]))) for site_id in call.site_ids
        )
    return groups


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
) -> list[CallResult]:
    """Send the update calls of one type, sized by time; queued jobs come back with their id for the sensor.

    `untouchable`: per site, the slugs of this type it has pending or ignored that are not planned. Every call
    is journalled before it is sent; a call whose answer was lost is never sent again: its sites are waited on
    until quiet, and reconcile reads what landed.
    """
    sizer = sizer or settings.call_sizer()
    journal = JobJournal(settings.state_path)
    reused, remaining = reuse_running_jobs([item for item in items if item.type is type_], type_, journal)
    logger = step_logger()
    for call in reused:
        logger.info("%s update job %s, started earlier, covers %d site(s): waiting on it (fleet dashboard job %s)",
                    type_.value, call.job_id, len(call.call.site_ids), call.job_id)
    index = SiteErrorIndex(sites)
    versions = {(item.site_id, item.slug): (item.from_version or "", item.to_version or "") for item in remaining}
    tally = Tally(total=len(remaining))

    async def send(key: object, work: list[Work]) -> tuple[CallResult, float | None]:
        _, per_site = key  # type: ignore[misc]
        site_ids = list(dict.fromkeys(part.site_id for part in work))  # a site's parts may share a call again
        # run-updates-v1 does not filter translations by slug: a part of a slow site's translations goes
        # through the per-site route, which updates only the named ones (parts never share a call)
        per_site = per_site or (type_ is UpdateType.translation and work[0].part)
        slugs = sorted({slug for part in work for slug in part.slugs})
        call = UpdateCall(type=type_, site_ids=site_ids, slugs=slugs, per_site=per_site)
        planned = [(part.site_id, slug, *versions[(part.site_id, slug)]) for part in work for slug in part.slugs]
        intent = journal.intend(run_id, "update", type_, planned)
        limit = (concurrency(settings.concurrency_limit, occupy=1, strict=False) if settings.concurrency_limit
                 else contextlib.nullcontext())
        try:
            async with limit:
                if call.per_site:
                    answer = await client.update_site_items(call.site_ids[0], call.type, call.slugs)
                    journal.answered(intent)
                    return CallResult(call=call, reports=reports_from_site_route(call.site_ids[0], answer)), None
                start = await client.run_updates(call.site_ids, [call.type], call.slugs)
        except FATAL_ERRORS:
            raise
        except OutcomeUnknown as error:
            sizer.lost("update_item", work)
            logger.warning("%s update of site(s) %s: %s; not sent again, waiting for the sites to be quiet",
                           type_.value, site_ids, error)
            landed = {(site_id, type_.value, slug, version) for site_id, slug, version, _ in planned}
            quiet = await wait_for_quiet_sites(client, site_ids, "update_item", sizer, settings, landed)
            journal.answered(intent)
            return CallResult(call=call, lost=str(error), quiet=quiet.quiet), None
        except DashboardError as error:  # this call's items are reconciled and carry the error
            journal.answered(intent)
            return CallResult(call=call, error=str(error)), None
        journal.answered(intent)
        refused = [
            ItemReport(site_id=site_id, ok=False, message=describe(error.code, error.message))
            for error in start.errors
            if (site_id := index.site_id(error)) is not None
        ]
        if start.queued and start.job_id:
            journal.record(JournalEntry(job_id=start.job_id, run_id=run_id, kind="update", type=call.type,
                                        started_at=datetime.now(UTC), site_ids=call.site_ids, slugs=call.slugs))
            logger.info("%s update job %s queued for %d site(s) (follow it: fleet dashboard job %s)",
                        type_.value, start.job_id, len(site_ids), start.job_id)
            return CallResult(call=call, job_id=start.job_id, reports=refused), None
        reports = refused + (reports_from_run(start.result) if start.result else [])
        return CallResult(call=call, reports=reports), start.elapsed

    def applied(units: int) -> None:
        tally.add(units)
        if progress is not None:
            progress.add(progress.applied, units)

    groups = sized_groups(remaining, type_, untouchable)
    async with heartbeat(logger, lambda: f"{type_.value} updates: {tally.describe('item(s)')}",
                         settings.progress_seconds):
        sent = await send_sized(sizer, "update_item", groups, send, settings.concurrency, on_done=applied)
    journal.close()
    return reused + [call.result for call in sent]


@task(name="execute-updates", task_run_name="execute-{type_}-{label}", **STEP_OPTIONS)
async def execute_updates_task(
    client: DashboardClient,
    items: list[PlanItem],
    type_: UpdateType,
    sites: list[SiteRecord],
    run_id: str,
    settings: PipelineSettings,
    untouchable: dict[int, list[str]] | None = None,
    label: str = "all",
    sizer: CallSizer | None = None,
    progress: NightProgress | None = None,
) -> list[CallResult]:
    return await execute_updates(client, items, type_, sites, run_id, settings, untouchable, sizer, progress)
