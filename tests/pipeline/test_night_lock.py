"""A dashboard's night lock (issue 48): free as soon as its holder's process is gone, whatever killed it, without a
Prefect server's help; held while its holder lives, and a waiting run says once who holds it and gives up at its
bound; a holder on another machine is dead once its lease lapses; a pid given again is not the dead holder."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet.state.dashboard_memory import DashboardMemory
from fleet.state.night_lock import LEASE, Holder, NightBusy, NightLock, Refused, Taken
from fleet.state.processes import RunProcess
from orchestration.limits import night_lock

ROOT = Path(__file__).resolve().parents[2]


def memory(tmp_path: Path) -> DashboardMemory:
    return DashboardMemory(tmp_path / "fleet-state.sqlite", "https://dash.example.com/wp-json")


def holder(run: str, process: RunProcess | None = None, since: datetime | None = None) -> Holder:
    return Holder(run=run, what="nightly-maintenance", process=process or RunProcess.this(),
                  since=since or datetime.now(UTC))


def test_a_lock_whose_holder_was_killed_is_taken_at_once(tmp_path: Path) -> None:
    """The killed night's process held the lock; no lease had to lapse and no Prefect server had to reclaim it."""
    path = memory(tmp_path).lock_path
    script = textwrap.dedent(f"""
        import sys, time
        from datetime import UTC, datetime
        from fleet.state.night_lock import Holder, NightLock, Taken
        from fleet.state.processes import RunProcess
        from pathlib import Path
        taken = NightLock(Path({str(path)!r})).take(Holder("killed-night", "nightly-maintenance", RunProcess.this(),
                                                     datetime.now(UTC), "flow-run-1"))
        print("taken" if isinstance(taken, Taken) else "refused", flush=True)
        time.sleep(600)
    """)
    night = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert night.stdout.readline().strip() == "taken"
        refused = NightLock(path).take(holder("tonight"))
        assert isinstance(refused, Refused) and refused.holder.run == "killed-night"
        night.send_signal(signal.SIGKILL)
        night.wait()
    finally:
        night.kill()
        night.wait()
    taken = NightLock(path).take(holder("tonight"))
    assert isinstance(taken, Taken) and taken.replaced is not None
    assert (taken.replaced.run, taken.replaced.flow_run_id) == ("killed-night", "flow-run-1")
    assert NightLock(path).holder().run == "tonight"


async def test_a_live_holder_keeps_it_and_a_waiting_run_says_so_once_then_gives_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="fleet.night_lock")
    async with night_lock(memory(tmp_path), "nightly") as first:
        with pytest.raises(NightBusy) as busy:
            async with night_lock(memory(tmp_path), "security", wait=0.3):
                pytest.fail("two runs held one dashboard's night lock")
    said = str(busy.value)
    assert f"held by {first.what} run {first.run} (process {os.getpid()}" in said and "for 0.3 s" in said
    assert f"since {first.since:%Y-%m-%d %H:%M:%S} UTC" in said and "did not start" in said
    waiting = [r.getMessage() for r in caplog.records if r.getMessage().startswith("waiting for the night lock")]
    assert len(waiting) == 1 and first.run in waiting[0]
    async with night_lock(memory(tmp_path), "security", wait=0.3):  # released when the first run ended
        assert NightLock(memory(tmp_path).lock_path).holder().what == "security"
    assert NightLock(memory(tmp_path).lock_path).holder() is None


async def test_a_waiting_run_takes_the_lock_once_its_holder_ends(tmp_path: Path) -> None:
    order: list[str] = []

    async def night() -> None:
        async with night_lock(memory(tmp_path), "nightly"):
            order.append("night")
            await asyncio.sleep(0.5)
            order.append("night done")

    async def security() -> None:
        await asyncio.sleep(0.1)
        async with night_lock(memory(tmp_path), "security", wait=30):
            order.append("security")

    await asyncio.gather(night(), security())
    assert order == ["night", "night done", "security"]


def test_a_holder_on_another_machine_is_dead_once_its_lease_lapses(tmp_path: Path) -> None:
    path = memory(tmp_path).lock_path
    elsewhere = holder("worker-night", RunProcess("worker-7.example", 4242, 1.0))
    now = datetime.now(UTC)
    assert isinstance(NightLock(path).take(elsewhere, now=now), Taken)
    assert NightLock(path).renew(elsewhere, now=now + LEASE / 2)
    assert isinstance(NightLock(path).take(holder("tonight"), now=now + LEASE), Refused)  # renewed: alive
    taken = NightLock(path).take(holder("tonight"), now=now + LEASE / 2 + LEASE + timedelta(seconds=1))
    assert isinstance(taken, Taken) and taken.replaced.run == "worker-night"
    assert not NightLock(path).renew(elsewhere), "the lapsed holder learns it lost the lock"


def test_a_pid_given_again_to_another_process_is_not_the_dead_holder(tmp_path: Path) -> None:
    """After a reboot the killed night's pid may belong to a live process: its start time tells them apart."""
    mine = RunProcess.this()
    before_a_reboot = holder("killed-night", RunProcess(mine.host, mine.pid, mine.started - 86_400))
    path = memory(tmp_path).lock_path
    assert isinstance(NightLock(path).take(before_a_reboot), Taken)
    taken = NightLock(path).take(holder("tonight"))
    assert isinstance(taken, Taken) and taken.replaced.run == "killed-night"
