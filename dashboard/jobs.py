"""Waiting on a batch job: the poll loop behind the pipeline's sensor.

The real dashboard first moves a queued job about 60 s after queueing, then one chunk (20 sites) per
30 s, and keeps jobs 24 hours. The loop polls with a growing interval, reports progress, and tells four
endings apart: finished (returned), deadline passed (`JobTimedOut`), no progress for too long
(`JobStalled`), still queued long after the first cron run should have fired (`JobNeverStarted`: the
dashboard's WP-Cron is not running) and gone (`JobNotFound`, or `JobExpired` if it was seen before).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from dashboard.errors import (
    JobExpired,
    JobNeverStarted,
    JobNotFound,
    JobStalled,
    JobTimedOut,
    RateLimited,
    ServerError,
    TransportError,
)
from dashboard.models import JobState, JobStatus

log = logging.getLogger("dashboard.jobs")

ProgressCallback = Callable[[JobStatus], object]


@dataclass(frozen=True)
class WaitPolicy:
    """How long and how often to wait. Defaults fit the real dashboard's 60 s start and 30 s chunks."""

    deadline: float = 4 * 3600 + 600  # the dashboard's own job timeout is 4 hours
    poll_interval: float = 5.0
    max_poll_interval: float = 30.0
    backoff: float = 1.5
    stall_after: float = 300.0  # ten chunk intervals without progress
    never_started_after: float = 300.0  # five times the 60 s first run
    max_poll_failures: int = 3  # consecutive failed polls tolerated (each already retried by the transport)

    def __post_init__(self) -> None:
        for name in ("deadline", "poll_interval", "max_poll_interval", "stall_after", "never_started_after"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.backoff < 1:
            raise ValueError("backoff must be at least 1")


async def wait_for_job(
    fetch: Callable[[], Awaitable[JobStatus]],
    job_id: str,
    policy: WaitPolicy = WaitPolicy(),
    *,
    on_progress: ProgressCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> JobStatus:
    """Poll `fetch` until the job is completed or failed, and return that final status."""
    started = clock()
    last_change = started
    last_key: tuple[object, ...] | None = None
    last: JobStatus | None = None
    interval = policy.poll_interval
    failures = 0
    polls = 0
    while True:
        try:
            status = await fetch()
            failures = 0
        except JobNotFound as exc:
            if last is None:
                raise
            raise JobExpired(
                f"job {job_id} disappeared after {polls} polls (expired or purged); last status {last.status.value}",
                job_id=job_id, last_status=last, code=exc.code, status=exc.status, method=exc.method, path=exc.path,
            ) from None
        except (TransportError, ServerError, RateLimited) as exc:
            failures += 1
            if failures > policy.max_poll_failures:
                raise
            log.warning("job %s: poll failed (%s), %d/%d", job_id, exc, failures, policy.max_poll_failures)
            status = None
        now = clock()
        elapsed = now - started
        if status is not None:
            polls += 1
            last = status
            key = (status.status, status.processed, status.progress, status.failed)
            if key != last_key:
                last_key, last_change = key, now
                if on_progress is not None:
                    on_progress(status)
            if status.finished:
                return status
            if status.status is JobState.queued and elapsed >= policy.never_started_after:
                raise JobNeverStarted(
                    f"job {job_id} is still queued after {elapsed:.0f}s: the dashboard's WP-Cron is not running "
                    "(check DISABLE_WP_CRON and the system cron that calls wp-cron.php)",
                    job_id=job_id, last_status=status,
                )
            if status.status is JobState.processing and now - last_change >= policy.stall_after:
                raise JobStalled(
                    f"job {job_id} made no progress for {now - last_change:.0f}s "
                    f"({status.processed}/{status.total} processed)",
                    job_id=job_id, last_status=status,
                )
        if elapsed >= policy.deadline:
            progress = f"{last.processed}/{last.total} processed, {last.status.value}" if last else "never read"
            raise JobTimedOut(f"job {job_id} not finished after {elapsed:.0f}s ({progress})",
                              job_id=job_id, last_status=last)
        await sleep(max(0.0, min(interval, policy.deadline - elapsed)))
        interval = min(interval * policy.backoff, policy.max_poll_interval)
