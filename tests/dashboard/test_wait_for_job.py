"""The poll loop's decisions, on a scripted sequence of statuses and a virtual clock (no sleeping).

The same loop runs against the emulator's real jobs in test_emulator_jobs.py.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dashboard.errors import JobExpired, JobNeverStarted, JobNotFound, JobStalled, JobTimedOut, ServerError
from dashboard.jobs import WaitPolicy, wait_for_job
from dashboard.models import JobStatus

JOB = "update_0a1b2c3d-0000-4000-8000-000000000000"


def status(state: str, processed: int = 0, total: int = 40) -> JobStatus:
    return JobStatus.model_validate({
        "job_id": JOB, "type": "update", "status": state, "processed": processed, "total": total,
        "progress": round(processed / total * 100), "started_at": None if state == "queued" else "2026-11-21T10:00:00Z",
    })


class Script:
    """Answers one scripted item per poll (a status or an exception); the last one repeats."""

    def __init__(self, *answers: JobStatus | Exception) -> None:
        self.answers = list(answers)
        self.polls = 0
        self.now = 0.0
        self.sleeps: list[float] = []

    async def fetch(self) -> JobStatus:
        answer = self.answers[min(self.polls, len(self.answers) - 1)]
        self.polls += 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def wait(self, policy: WaitPolicy, on_progress: Callable[[JobStatus], object] | None = None) -> JobStatus:
        return await wait_for_job(self.fetch, JOB, policy, on_progress=on_progress, clock=self.clock,
                                  sleep=self.sleep)


async def test_returns_the_final_status_and_reports_each_change() -> None:
    script = Script(status("queued"), status("queued"), status("processing", 20), status("processing", 20),
                    status("completed", 40))
    seen: list[tuple[str, int]] = []
    final = await script.wait(WaitPolicy(poll_interval=10, max_poll_interval=30),
                              on_progress=lambda s: seen.append((s.status.value, s.processed)))
    assert final.status.value == "completed" and final.processed == 40
    assert seen == [("queued", 0), ("processing", 20), ("completed", 40)]
    assert script.sleeps == [10, 15, 22.5, 30]  # grows by 1.5 up to the cap


async def test_a_failed_job_is_a_final_status_not_an_error() -> None:
    final = await Script(status("processing", 1), status("failed", 1)).wait(WaitPolicy(poll_interval=1))
    assert final.status.value == "failed"


async def test_queued_for_too_long_means_the_cron_is_not_firing() -> None:
    script = Script(status("queued"))
    with pytest.raises(JobNeverStarted, match="WP-Cron") as caught:
        await script.wait(WaitPolicy(poll_interval=30, never_started_after=300, deadline=3600))
    assert caught.value.last_status.status.value == "queued"
    assert 300 <= script.now < 400


async def test_no_progress_while_processing_is_a_stall() -> None:
    script = Script(status("queued"), status("processing", 20))
    with pytest.raises(JobStalled) as caught:
        await script.wait(WaitPolicy(poll_interval=30, stall_after=120, deadline=3600))
    assert not isinstance(caught.value, JobNeverStarted)
    assert "20/40" in str(caught.value)


async def test_slow_but_moving_job_times_out_at_the_deadline() -> None:
    states = [status("processing", n) for n in range(1, 40)]
    script = Script(*states)
    with pytest.raises(JobTimedOut) as caught:
        await script.wait(WaitPolicy(poll_interval=10, max_poll_interval=10, deadline=100, stall_after=50))
    assert script.now == pytest.approx(100)
    assert caught.value.last_status.processed >= 10


async def test_unknown_job_is_not_found_and_a_vanished_one_expired() -> None:
    gone = JobNotFound("Batch job not found.", code="svc_job_not_found", status=404)
    with pytest.raises(JobNotFound) as first:
        await Script(gone).wait(WaitPolicy(poll_interval=1))
    assert not isinstance(first.value, JobExpired)
    with pytest.raises(JobExpired, match="disappeared"):
        await Script(status("processing", 5), gone).wait(WaitPolicy(poll_interval=1))


async def test_a_few_failed_polls_are_tolerated_but_not_forever() -> None:
    blip = ServerError("HTTP 502", status=502)
    final = await Script(status("processing", 5), blip, blip, status("completed", 40)).wait(
        WaitPolicy(poll_interval=1, max_poll_failures=2))
    assert final.finished
    with pytest.raises(ServerError):
        await Script(status("processing", 5), blip).wait(WaitPolicy(poll_interval=1, max_poll_failures=2))


def test_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="deadline"):
        WaitPolicy(deadline=0)
