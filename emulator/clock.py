"""The emulator's scalable clock: every dashboard delay is multiplied by `time_scale`.

At `time_scale=0.001` the dashboard's 60 s before a queued job's first chunk take 60 ms of wall time, its 4 h job
timeout 14.4 s and its 24 h job expiry 86.4 s. Tests can also jump the dashboard's clock forward with `advance`
(ground truth for timeouts and expiry without waiting).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime


class Clock:
    """Wall-clock time with scaled delays and a forward-only offset."""

    def __init__(self, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.time_scale = time_scale
        self._offset = 0.0

    def now(self) -> float:
        """Unix seconds as the dashboard sees them (wall time plus any `advance`)."""
        return time.time() + self._offset

    def scaled(self, nominal_seconds: float) -> float:
        """Wall seconds that a dashboard delay of `nominal_seconds` takes."""
        return nominal_seconds * self.time_scale

    async def sleep(self, nominal_seconds: float) -> None:
        await asyncio.sleep(self.scaled(nominal_seconds))

    def advance(self, nominal_seconds: float) -> None:
        """Jump the dashboard's clock forward by a nominal delay (as if that much dashboard time had passed)."""
        if nominal_seconds < 0:
            raise ValueError("the clock only moves forward")
        self._offset += self.scaled(nominal_seconds)

    def deadline(self, since: float, nominal_seconds: float) -> float:
        """The dashboard time at which a delay of `nominal_seconds` started at `since` ends."""
        return since + self.scaled(nominal_seconds)


def iso_utc(timestamp: float | None) -> str | None:
    """`Y-m-d\\TH:i:s\\Z` as the job status ability prints it, or None."""
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
