"""The sensor: wait on a dashboard batch job, with a deadline under the dashboard's 4 h timeout.

A job that runs out of time, stalls, never starts (the dashboard's WP-Cron is not firing) or expires does not
fail the run: it ends with a clear reason, and reconcile decides what its items became.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from dashboard.errors import JobError, JobExpired, JobNeverStarted, JobNotFound, JobStalled, JobTimedOut
from dashboard.jobs import WaitPolicy, wait_for_job
from dashboard.models import JobStatus
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Job
from fleet.model.vocabulary import count
from fleet.pacing.progress import PLAIN_LOG, Log, Tally, heartbeat
from fleet.rules.execution import JobEnding, JobOutcome, reports_from_job

if TYPE_CHECKING:
    from collections.abc import Callable

    from dashboard.client import DashboardClient

_ENDINGS: tuple[tuple[type[Exception], JobEnding], ...] = (
    (JobNeverStarted, JobEnding.never_started),
    (JobStalled, JobEnding.stalled),
    (JobTimedOut, JobEnding.deadline),
    (JobExpired, JobEnding.expired),
    (JobNotFound, JobEnding.not_found),
)


async def wait_for_batch_job(
    client: DashboardClient,
    job_id: str,
    kind: str,
    site_ids: list[int],
    settings: PipelineSettings,
    on_progress: Callable[[JobStatus], object] | None = None,
    log: Log = PLAIN_LOG,
) -> JobOutcome:
    """Wait until the job finishes or the wait ends for a stated reason; never raise for a job that went wrong.
    `log` hears how far the job is while it is waited on."""
    polls = 0
    started = time.monotonic()
    last: JobStatus | None = None

    async def poll() -> JobStatus:
        nonlocal polls, last
        polls += 1
        last = await client.job_status(job_id)
        return last

    def describe() -> str:
        if last is None:
            return f"{kind} job {job_id} over {count(len(site_ids), 'site')}: not read yet"
        tally = Tally(total=last.total or len(site_ids), done=last.processed or 0, started=started)
        return f"{kind} job {job_id}: {last.status.value}, {tally.describe('sites')}, {last.failed} failed"

    policy = WaitPolicy(
        deadline=settings.job_deadline,
        poll_interval=settings.job_poll_seconds,
        max_poll_interval=max(settings.job_poll_seconds, min(30.0, settings.job_poll_seconds * 6)),
        stall_after=settings.stall_after_seconds,
        never_started_after=settings.stall_after_seconds,
    )
    try:
        async with heartbeat(log, describe, settings.progress_seconds):
            status = await wait_for_job(poll, job_id, policy, on_progress=on_progress)
    except (JobError, JobNotFound) as error:
        last = getattr(error, "last_status", None)
        ending = next((name for kind_, name in _ENDINGS if isinstance(error, kind_)), JobEnding.error)
        return JobOutcome(
            job=Job(id=job_id, type=kind, sites=len(site_ids), status=ending.value,
                    seconds_waited=round(time.monotonic() - started, 3), polls=polls,
                    reason=getattr(error, "message", str(error))),
            site_ids=site_ids,
            finished=False,
            reports=reports_from_job(last) if isinstance(last, JobStatus) else [],
        )
    reason = None
    if status.job_timed_out or status.job_error_code:
        reason = status.job_error_message or "the dashboard timed the job out after 4 hours"
    elif status.failed:
        reason = f"{status.failed} of {count(status.total, 'site')} reported errors"
    return JobOutcome(
        job=Job(id=job_id, type=kind, sites=len(site_ids), status=status.status.value,
                seconds_waited=round(time.monotonic() - started, 3), polls=polls, reason=reason),
        site_ids=site_ids,
        finished=True,
        reports=reports_from_job(status),
    )
