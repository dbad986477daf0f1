"""A night killed under `fleet serve` on a real Prefect server (issue 48): its process SIGKILLed mid-night, as an OOM
kill would, while it holds the dashboard's night lock and `fleet serve` goes on. The next night (started by hand at
once, as from Prefect's UI, rather than waited for) starts its work (the lock's holder is dead, so the lock is free),
accounts for what the killed night applied, and completes; the killed night is Crashed in Prefect and the chat is
told so. Before the fix the lock was a Prefect concurrency slot, free again only once its lease lapsed (minutes;
a temporary server never freed it)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from bench.serve_stops import (
    NIGHTLY,
    SERVE_SETTINGS,
    flow_run_processes,
    journal,
    new_releases,
    night_of,
    nightly_runs,
    stop_group,
    trigger,
    wait_until,
)
from tests.deployments.serve_world import World, served_world
from tests.deployments.test_serve_stops import intents

pytestmark = pytest.mark.long(70)  # a real Prefect server, `fleet serve` and two nights
# the next night (every 30 s, the shortest schedule fleet serve takes) waits for the sites of the killed night's
# unanswered calls to go quiet: with nothing measured yet, three call budgets (150 s) unless bounded; 10 s is enough
# for this test's 3 emulated sites
SETTINGS = SERVE_SETTINGS | {"FLEET_QUIET_WAIT_SECONDS": "10"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with served_world(tmp_path_factory.mktemp("serve-kills")) as found:
        yield found


def test_a_night_killed_under_fleet_serve_leaves_no_lock_and_the_next_night_accounts_for_it(
    world: World, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    since = world.since()
    assert new_releases(world.emulator)  # the night has update calls to be killed among
    serving, output = world.serve(tmp_path, SETTINGS)
    try:
        killed = wait_until(lambda: next((run for run in nightly_runs(world.server) if run["state_type"] == "RUNNING"
                                          and night_of(run["id"], {r: {} for r in journal(home) if intents(home, r)})),
                                         None), 120, 0.05)
        assert killed, output.read_text()[-3000:]
        night = night_of(killed["id"], journal(home))
        processes = flow_run_processes(home)
        assert processes, "the night runs in a process of its own"
        for pid in processes:
            os.kill(pid, signal.SIGKILL)
        began = time.time()

        crashed = wait_until(lambda: world.run(killed["name"])["state_type"] == "CRASHED", 60, 0.5)
        assert crashed, (world.run(killed["name"])["state"], output.read_text()[-3000:])
        manual = trigger(world.server, NIGHTLY)  # the next night at once, as a run from Prefect's UI
        again = wait_until(lambda: next((run for run in nightly_runs(world.server) if run["state_type"] in (
            "COMPLETED", "FAILED", "CRASHED") and run["start_time"] and datetime.fromisoformat(
                run["start_time"]).timestamp() >= began), None), 180, 0.5)
        assert again and again["state_type"] == "COMPLETED", (again, output.read_text()[-3000:])
        assert again["id"] == manual, "no scheduled night came first"
        assert "whose process is gone: taken over" in output.read_text()  # the lock, said once
        rows = journal(home)
        assert rows[night] == {"finished": False, "accounted_by": night_of(again["id"], rows)}, rows
        assert wait_until(lambda: any(killed["name"] in text for text in world.crashed_said(since)), 60, 0.5), \
            world.chat.texts()
        assert serving.poll() is None, output.read_text()[-3000:]  # fleet serve went on
    finally:
        code, _ = stop_group(serving, signal.SIGINT, 150)
    assert code == 0, output.read_text()[-3000:]
