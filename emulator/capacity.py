"""The capacity model: modelled work time per site operation, run by a bounded number of dashboard workers."""

from __future__ import annotations

import asyncio

from emulator.clock import Clock

DEFAULT_WORK_SECONDS = {"sync": 2.0, "check": 1.0, "update_item": 3.0, "reconnect": 2.0}


class Capacity:
    def __init__(self, clock: Clock, workers: int = 8, work_seconds: dict[str, float] | None = None) -> None:
        self.clock = clock
        self.workers = workers
        self.work_seconds = {**DEFAULT_WORK_SECONDS, **(work_seconds or {})}
        self._slots = asyncio.Semaphore(workers)

    async def work(self, operation: str, units: int = 1) -> None:
        """Occupy one worker for the modelled time of `units` operations."""
        seconds = self.work_seconds.get(operation, 0.0) * units
        if seconds <= 0:
            return
        async with self._slots:
            await self.clock.sleep(seconds)
