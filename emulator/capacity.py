"""The capacity model: modelled work time per site operation, run by a bounded number of dashboard workers.

A real dashboard talks to each child site over HTTP; a sync or an update takes seconds and only so many run at
once (PHP workers, WP-Cron). The emulator makes every site operation occupy one of `workers` slots for its
modelled time (scaled by the clock), so the total modelled work divided by the workers is a physical lower
bound a benchmark can compare its wall time with.

Each operation books the worker that is free first, from the moment that worker is free (first come, first
served), and sleeps until its booked end. A worker's next operation starts at the previous one's booked end,
not when the event loop got round to waking it: at small time scales that lateness (a millisecond or two per
operation, 10% of a 20 ms sync) would otherwise pile up into a dashboard slower than the one modelled.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import Counter

from emulator.clock import Clock

# Nominal seconds of dashboard work per operation (per item for `update_item`).
DEFAULT_WORK_SECONDS = {
    "sync": 2.0,
    "check": 1.0,
    "update_item": 3.0,
    "reconnect": 2.0,
    "disconnect": 0.5,
}


class Capacity:
    """Bounded concurrency for site operations, with a ledger of the work it modelled."""

    def __init__(self, clock: Clock, workers: int = 8, work_seconds: dict[str, float] | None = None) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        negative = [op for op, seconds in (work_seconds or {}).items() if seconds < 0]
        if negative:
            raise ValueError(f"work seconds must not be negative: {', '.join(sorted(negative))}")
        self.clock = clock
        self.workers = workers
        self.work_seconds = {**DEFAULT_WORK_SECONDS, **(work_seconds or {})}
        self._free_at = [0.0] * workers  # a heap: when each worker is next free (monotonic seconds)
        self.operations: Counter[str] = Counter()
        self.modelled_seconds = 0.0

    def cost(self, operation: str, units: int = 1) -> float:
        """Nominal seconds that `units` of `operation` take on one worker."""
        return self.work_seconds.get(operation, 0.0) * max(units, 0)

    async def work(self, operation: str, units: int = 1) -> None:
        """Occupy one worker for the modelled time of `units` operations."""
        seconds = self.cost(operation, units)
        self.operations[operation] += max(units, 0)
        self.modelled_seconds += seconds
        if seconds <= 0:
            return
        now = time.monotonic()
        ends = max(now, heapq.heappop(self._free_at)) + self.clock.scaled(seconds)
        heapq.heappush(self._free_at, ends)
        await asyncio.sleep(ends - now)

    def lower_bound_seconds(self) -> float:
        """Wall seconds the work modelled so far needs at the very least: total work / workers, scaled."""
        return self.clock.scaled(self.modelled_seconds / self.workers)

    def snapshot(self) -> dict[str, object]:
        return {
            "workers": self.workers,
            "work_seconds": dict(self.work_seconds),
            "operations": dict(self.operations),
            "modelled_seconds": round(self.modelled_seconds, 3),
            "lower_bound_wall_seconds": round(self.lower_bound_seconds(), 6),
        }
