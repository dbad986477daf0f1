"""The stop of `fleet serve` as the runs it serves see it: obeyed at a safe point between calls to the dashboard.

`fleet serve` names a file in its runs' environment (`FLEET_STOP_FILE`) and creates it when it is stopped. A run
then sends no new call: the calls in flight are answered and journalled, and the run ends Cancelled, saying why;
the next run accounts for what it applied (its journal stays open: `fleet.engine.interrupted`). Outside
`fleet serve` (a terminal's `fleet nightly`, the tests' plain calls) no stop is ever asked for.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from prefect.exceptions import Abort

from fleet.model.vocabulary import count

STOP_FILE = "FLEET_STOP_FILE"  # the file `fleet serve` creates when it stops (set for its runs' processes only)
CANCELLED_BY_THE_STOP = "cancelled by the stop of `fleet serve`"
BEFORE_IT_STARTED = f"{CANCELLED_BY_THE_STOP} before it started"
BEFORE_A_CALL = f"{CANCELLED_BY_THE_STOP} before its first call to the dashboard"


def at_a_safe_point(calls: int) -> str:
    if not calls:
        return BEFORE_A_CALL
    return (f"{CANCELLED_BY_THE_STOP} at a safe point between calls, after {count(calls, 'call')} to the dashboard, "
            "each answered and journalled: the next run accounts for what it applied")


def stop_requested() -> bool:
    """`fleet serve`, which runs this process's flow run, is stopping."""
    path = os.environ.get(STOP_FILE)
    return bool(path) and os.path.exists(path)


class StoppedByServe(Abort):
    """The run stopped at a safe point because `fleet serve` is stopping; its Cancelled state is already set.

    An `Abort`, as when Prefect's orchestrator ends a run: the flow engine records the state it carries and runs
    no failure or crash hook (no "failed" or "crashed" alert for a stop), and no step retries it."""

    def __init__(self, message: str, state: Any = None) -> None:
        super().__init__(message)
        self.state = state


class _InFlight:
    """The calls this process has sent and not yet read the answer of (every step's, side by side)."""

    lock = threading.Lock()
    calls = 0
    sent = 0  # every call this process sent


_INSIDE_A_CALL: ContextVar[bool] = ContextVar("inside_a_call", default=False)


async def safe_point(poll: float = 0.1) -> None:
    """Go on, unless a stop was asked for: then wait until no call is in flight, and end the run."""
    if not stop_requested():
        return
    while _InFlight.calls:
        await asyncio.sleep(poll)
    message = at_a_safe_point(_InFlight.sent)
    raise StoppedByServe(message, await cancel_this_run(message))


@asynccontextmanager
async def call_in_flight() -> AsyncIterator[None]:
    """A call to the dashboard, from its sending to its answer read and journalled; the safe point before it (a
    call made while reading another's answer is part of that one: it never waits for itself)."""
    if _INSIDE_A_CALL.get():
        yield
        return
    await safe_point()
    with _InFlight.lock:
        _InFlight.calls += 1
        _InFlight.sent += 1
    inside = _INSIDE_A_CALL.set(True)
    try:
        yield
    finally:
        _INSIDE_A_CALL.reset(inside)
        with _InFlight.lock:
            _InFlight.calls -= 1


async def cancel_this_run(message: str) -> Any:
    """Set this process's flow run Cancelled with `message`; its new state (None outside a flow run)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run
    from prefect.states import Cancelled

    if not flow_run.id:
        return None
    async with get_client() as client:
        answer = await client.set_flow_run_state(flow_run.id, Cancelled(message=message), force=True)
    return answer.state
