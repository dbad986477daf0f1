"""Progress while the night waits: counts of what is done, and a log line at least every so often.

At real speed a step waits minutes on the dashboard (a job, a slow call, sites going quiet). Nobody watching
a silent log can tell a slow night from a hung one, so every wait says what it waits on, how far it is and
how long it should still take.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

FIRST_LINE_AFTER = 10.0  # a wait shorter than this says nothing
Log = logging.Logger | logging.LoggerAdapter  # a Prefect run's logger, handed in by its task, or a plain one
PLAIN_LOG = logging.getLogger("fleet")  # the log of a plain call outside any run


@dataclass
class Tally:
    """Done out of total, with the rate so far for an estimate of the time left."""

    total: int = 0
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    def add(self, done: int) -> None:
        self.done += done

    def left_seconds(self) -> float | None:
        spent = time.monotonic() - self.started
        if self.done <= 0 or spent <= 0 or self.total <= self.done:
            return None
        return (self.total - self.done) * spent / self.done

    def describe(self, unit: str = "") -> str:
        left = self.left_seconds()
        estimate = f", about {format_seconds(left)} left" if left is not None else ""
        return f"{unit + ' ' if unit else ''}{self.done}/{self.total}{estimate}"


@dataclass
class NightProgress:
    """The night's three counts (what the progress artifact shows); `changed` is told of every move."""

    synced: Tally = field(default_factory=Tally)
    applied: Tally = field(default_factory=Tally)
    checked: Tally = field(default_factory=Tally)
    changed: Callable[[NightProgress], object] | None = None

    def add(self, tally: Tally, done: int) -> None:
        tally.add(done)
        if self.changed is not None:
            self.changed(self)

    def percent(self) -> float:
        tallies = (self.synced, self.applied, self.checked)
        total = sum(t.total for t in tallies)
        return 100.0 * sum(min(t.done, t.total) for t in tallies) / total if total else 0.0

    def describe(self) -> str:
        counts = (f"sites synced {self.synced.done}/{self.synced.total}, items applied "
                  f"{self.applied.done}/{self.applied.total}, sites checked {self.checked.done}/{self.checked.total}")
        percent = self.percent()
        spent = time.monotonic() - self.synced.started
        if 0 < percent < 100:
            counts += f", about {format_seconds(spent * (100 - percent) / percent)} left"
        return counts


def format_seconds(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


@contextlib.asynccontextmanager
async def heartbeat(log: Log, describe: Callable[[], str],
                    every: float = 30.0) -> AsyncIterator[None]:
    """While the block runs: a line after `min(10 s, every)`, then one every `every` seconds."""

    async def beat() -> None:
        await asyncio.sleep(min(FIRST_LINE_AFTER, every))
        while True:
            log.info("still waiting: %s", describe())
            await asyncio.sleep(every)

    beating = asyncio.create_task(beat())
    try:
        yield
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
