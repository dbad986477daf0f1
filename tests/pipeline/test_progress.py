"""Progress while the night waits: counts, estimates and the heartbeat, without Prefect."""

from __future__ import annotations

import asyncio
import itertools
import logging

from fleet.pacing.progress import NightProgress, Tally, heartbeat


def test_a_tally_estimates_the_time_left_from_its_rate():
    tally = Tally(total=100, done=25)
    tally.started -= 30  # 25 done in 30 s
    assert tally.describe() == "25/100, about 1 min 30 s left"
    assert tally.describe("items") == "items 25/100, about 1 min 30 s left"  # a label, as the night's own line
    assert Tally(total=10).describe() == "0/10"


def test_the_nights_line_counts_all_three_and_estimates_the_rest():
    night = NightProgress()
    seen: list[str] = []
    night.changed = lambda progress: seen.append(progress.describe())
    night.synced.total, night.applied.total, night.checked.total = 10, 20, 10
    night.synced.started -= 40
    night.add(night.synced, 10)
    night.add(night.applied, 10)
    assert night.percent() == 50.0
    assert seen[-1] == "sites synced 10/10, items applied 10/20, sites checked 0/10, about 40 s left"


def test_the_heartbeat_speaks_during_a_long_wait_and_stops_after(caplog):
    log = logging.getLogger("fleet.test")
    calls = 0

    def describe() -> str:
        nonlocal calls
        calls += 1
        return f"call {calls}"

    said_during: list[str] = []

    async def wait() -> None:
        # waits until the heartbeat has spoken 5 times, however slowly a busy machine lets it speak
        async with heartbeat(log, describe, every=0.05):
            while len(caplog.records) < 5:
                await asyncio.sleep(0.01)
        said_during.extend(record.getMessage() for record in caplog.records)
        await asyncio.sleep(0.25)  # five intervals: a heartbeat that outlived its wait would speak here

    with caplog.at_level(logging.INFO, logger="fleet.test"):
        asyncio.run(wait())
    lines = [record.getMessage() for record in caplog.records]
    assert lines[:5] == [f"still waiting: call {n}" for n in range(1, 6)]
    assert lines == said_during, "none after the wait"
    gaps = [later.created - earlier.created for earlier, later in itertools.pairwise(caplog.records)]
    assert min(gaps) >= 0.045, "one line per interval at most"  # a sleep never ends early, however fast the machine
