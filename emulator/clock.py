"""The emulator's scalable clock: every dashboard delay is multiplied by `time_scale`."""

from __future__ import annotations

import asyncio
import time


class Clock:
    """Wall-clock time with scaled delays (0.001 turns the dashboard's 60 s into 60 ms)."""

    def __init__(self, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.time_scale = time_scale

    def now(self) -> float:
        return time.time()

    def scaled(self, nominal_seconds: float) -> float:
        return nominal_seconds * self.time_scale

    async def sleep(self, nominal_seconds: float) -> None:
        await asyncio.sleep(self.scaled(nominal_seconds))
