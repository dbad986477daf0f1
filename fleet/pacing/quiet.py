"""Waiting for sites to be quiet after a write whose answer was lost.

A 504 from the dashboard's gateway, a read timeout or a dropped connection does not stop the dashboard: its
PHP worker carries on and the work lands later. Sending the write again could apply it twice, so the state is
read with a growing interval until it stops moving (or shows the work done), within a bound; only then is it
re-read for good and reconciled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Quiet(Generic[T]):
    state: T
    quiet: bool  # False: the bound passed while the state still moved
    waited: float
    polls: int


async def wait_until_quiet(
    read: Callable[[], Awaitable[T]],
    *,
    settle: float,
    bound: float,
    done: Callable[[T], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> Quiet[T]:
    """Read until `done(state)`, or two reads at least `settle` seconds apart agree, or `bound` passes.

    The first read waits `settle` (the work most likely still runs); then the interval grows by half each
    time, up to four times `settle`.
    """
    started = clock()
    interval = settle
    polls = 0
    previous: T | None = None
    while True:
        await sleep(min(interval, max(0.0, bound - (clock() - started))))
        state = await read()
        polls += 1
        waited = clock() - started
        if (done is not None and done(state)) or (polls > 1 and state == previous):
            return Quiet(state, True, waited, polls)
        if waited >= bound:
            return Quiet(state, False, waited, polls)
        previous = state
        interval = min(interval * 1.5, settle * 4)
