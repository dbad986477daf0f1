"""Step 6: apply one update type, only the planned slugs per site, re-using any job already running for them.

Sites are grouped so that every site of a call plans exactly the call's slugs (the dashboard applies one
slug filter to all of them, and its queued jobs ignore the ignore lists). Each queued job is written to the
journal the moment its id is known, so a retried task or a re-run waits on it instead of starting it again.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prefect import task
from prefect.concurrency.asyncio import concurrency

from dashboard.errors import DashboardError
from fleet.execution import (
    CallResult,
    ItemReport,
    UpdateCall,
    plan_calls,
    reports_from_run,
    reports_from_site_route,
)
from fleet.fan_out import fan_out
from fleet.job_journal import JobJournal, JournalEntry
from fleet.plan import PlanItem
from fleet.settings import PipelineSettings
from fleet.summary import UpdateType
from tasks.retries import FATAL_ERRORS, STEP_OPTIONS
from tasks.sync import SiteErrorIndex, describe

if TYPE_CHECKING:
    from dashboard.client import DashboardClient
    from fleet.plan import SiteRecord


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


async def execute_updates(
    client: DashboardClient,
    items: list[PlanItem],
    type_: UpdateType,
    sites: list[SiteRecord],
    run_id: str,
    settings: PipelineSettings,
    untouchable: dict[int, list[str]] | None = None,
) -> list[CallResult]:
    """Send the update calls of one type; queued jobs come back with their id for the sensor.

    `untouchable`: per site, the slugs of this type it has pending or ignored that are not planned.
    """
    journal = JobJournal(settings.state_path)
    reused, remaining = reuse_running_jobs([item for item in items if item.type is type_], type_, journal)
    index = SiteErrorIndex(sites)

    async def send(call: UpdateCall) -> CallResult:
        limit = (concurrency(settings.concurrency_limit, occupy=1, strict=False) if settings.concurrency_limit
                 else contextlib.nullcontext())
        try:
            async with limit:
                if call.per_site:
                    answer = await client.update_site_items(call.site_ids[0], call.type, call.slugs)
                    return CallResult(call=call, reports=reports_from_site_route(call.site_ids[0], answer))
                start = await client.run_updates(call.site_ids, [call.type], call.slugs)
        except FATAL_ERRORS:
            raise
        except DashboardError as error:  # this call's items are reconciled and carry the error
            return CallResult(call=call, error=str(error))
        refused = [
            ItemReport(site_id=site_id, ok=False, message=describe(error.code, error.message))
            for error in start.errors
            if (site_id := index.site_id(error)) is not None
        ]
        if start.queued and start.job_id:
            journal.record(JournalEntry(job_id=start.job_id, run_id=run_id, kind="update", type=call.type,
                                        started_at=datetime.now(UTC), site_ids=call.site_ids, slugs=call.slugs))
            return CallResult(call=call, job_id=start.job_id, reports=refused)
        return CallResult(call=call, reports=refused + (reports_from_run(start.result) if start.result else []))

    calls = plan_calls(remaining, type_, settings.sites_per_call, untouchable)
    return reused + await fan_out(calls, send, settings.concurrency)


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
) -> list[CallResult]:
    return await execute_updates(client, items, type_, sites, run_id, settings, untouchable)
