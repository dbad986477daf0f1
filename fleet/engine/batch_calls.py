"""The one way a step sends batch calls sized by time: a lost answer is never sent again, the dashboard's
errors go back to their sites, and a queued job is named in the log (and waited on, for syncs and checks)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from dashboard.errors import DashboardError, OutcomeUnknown
from dashboard.models import BatchSiteError, BatchStart
from fleet.engine.batch_jobs import wait_for_batch_job
from fleet.model.settings import PipelineSettings
from fleet.model.vocabulary import count
from fleet.pacing.call_sizing import CallSizer, Operation, SizedCall, Work, send_sized
from fleet.pacing.progress import PLAIN_LOG, Log
from fleet.rules.execution import JobOutcome
from fleet.rules.site_errors import SiteErrorIndex

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

R = TypeVar("R")


def no_write_slot(limit: str) -> AbstractAsyncContextManager[object]:
    return nullcontext()


@dataclass(frozen=True)
class CallGate:
    """What the run puts around each call a step sends. The engine imports no Prefect: a task hands its run's gate
    in (`orchestration.call_gate`): the run's log, the safe point before each call (`fleet serve` stopping: no new
    call, those in flight answered and journalled), the errors that end the run instead of becoming a call's
    answer, and the dashboard's write slots an update call occupies. A plain call (a test's) gets none of them."""

    log: Log = PLAIN_LOG
    call_in_flight: Callable[[], AbstractAsyncContextManager[object]] = nullcontext
    fatal: tuple[type[Exception], ...] = ()
    write_slot: Callable[[str], AbstractAsyncContextManager[object]] = no_write_slot


@dataclass
class BatchCall:
    """One call of a step: what was sent, and what came back (an answer, a lost answer, or an error)."""

    key: Any
    work: list[Work]
    site_ids: list[int]
    intent: Any = None  # what the step wrote down before sending (update calls are journalled)
    answer: Any = None  # a BatchStart, or the answer of a per-site route
    lost: OutcomeUnknown | None = None
    error: DashboardError | None = None
    refused: list[tuple[int, BatchSiteError]] = field(default_factory=list)  # sites refused when queueing
    failed: list[tuple[int, BatchSiteError]] = field(default_factory=list)  # sites failing in the result
    job: JobOutcome | None = None  # the queued job, once waited on

    @property
    def job_id(self) -> str | None:
        start = self.answer
        return start.job_id if isinstance(start, BatchStart) and start.queued and start.job_id else None

    @property
    def elapsed(self) -> float | None:
        """The seconds the sizer learns from: only an immediate answer says how long the work took."""
        start = self.answer
        return start.elapsed if isinstance(start, BatchStart) and not start.queued else None


async def send_batch_calls(
    client: DashboardClient,
    sizer: CallSizer,
    operation: Operation,
    groups: dict[Any, list[Work]],
    send: Callable[[BatchCall], Awaitable[Any]],
    read: Callable[[BatchCall], Awaitable[R]],
    settings: PipelineSettings,
    index: SiteErrorIndex,
    what: str,
    *,
    wait_for_jobs: bool = True,
    keep_errors: bool = False,
    on_done: Callable[[int], object] | None = None,
    gate: CallGate = CallGate(),
) -> list[SizedCall[R]]:
    """Send every group's work through `send` in calls sized by `sizer`, and `read` each call once answered,
    each call through the run's `gate`.

    `what` names the calls in the log ("sync", "plugin update"). With `keep_errors` a dashboard error is the
    call's answer (its items are reconciled and carry it) instead of failing the step.
    """
    async def one_call(key: Any, work: list[Work]) -> tuple[R, float | None]:
        call = BatchCall(key, work, list(dict.fromkeys(part.site_id for part in work)))
        try:
            call.answer = await send(call)
        except gate.fatal:
            raise
        except OutcomeUnknown as error:
            sizer.lost(operation, work, gateway_after=error.elapsed if error.status == 504 else None)
            call.lost = error
        except DashboardError as error:
            if not keep_errors:
                raise
            call.error = error
        if isinstance(call.answer, BatchStart):
            result_errors = call.answer.result.errors if call.answer.result else []
            call.refused = [(site_id, error) for error in call.answer.errors
                            if (site_id := index.site_id(error)) is not None]
            call.failed = [(site_id, error) for error in result_errors if (site_id := index.site_id(error)) is not None]
        if call.job_id:
            gate.log.info("%s job %s queued for %s (follow it: fleet dashboard job %s)", what,
                          call.job_id, count(len(call.site_ids), "site"), call.job_id)
            if wait_for_jobs:
                call.job = await wait_for_batch_job(client, call.job_id, operation.value, call.site_ids, settings,
                                                    log=gate.log)
        return await read(call), call.elapsed

    async def after_a_safe_point(key: Any, work: list[Work]) -> tuple[R, float | None]:
        async with gate.call_in_flight():  # `fleet serve` stopping: no new call; those in flight answered, journalled
            return await one_call(key, work)

    return await send_sized(sizer, operation, groups, after_a_safe_point, settings.concurrency, on_done=on_done)
