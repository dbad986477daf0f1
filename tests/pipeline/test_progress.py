"""Progress while the night waits: counts, estimates and the heartbeat, without Prefect."""

from __future__ import annotations

import asyncio
import logging

from fleet.pacing.progress import NightProgress, Tally, heartbeat


def test_a_tally_estimates_the_time_left_from_its_rate():
    tally = Tally(total=100, done=25)
    tally.started -= 30  # 25 done in 30 s
    assert tally.describe() == "25/100, about 1 min 30 s left"
    assert tally.describe("item(s)") == "25/100 item(s), about 1 min 30 s left"
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

    async def wait() -> None:
        async with heartbeat(log, describe, every=0.05):
            await asyncio.sleep(0.28)
        await asyncio.sleep(0.1)

    with caplog.at_level(logging.INFO, logger="fleet.test"):
        asyncio.run(wait())
    lines = [record.getMessage() for record in caplog.records]
    assert lines[:2] == ["still waiting: call 1", "still waiting: call 2"]
    assert 4 <= len(lines) <= 6, "one line per interval, none after the wait"
