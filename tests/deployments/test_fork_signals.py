"""A stop signal that comes while `fleet serve` forks a run's process: the process left `fleet serve`'s group only
once it ran, so a SIGTERM to the group in between killed it before it could hear one, and the night ended Crashed
instead of Cancelled by the stop (seen once in a loaded suite, `test_serve_stops`). The signals are now held from
before the fork until the process is made, and the process hears them once it listens."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus

from deployments.serve import STOP_SIGNALS, _run_in_a_session_of_its_own

ROOT = Path(__file__).resolve().parents[2]


async def test_a_sigterm_as_a_runs_process_is_made_waits_until_it_listens_and_fleet_serve_hears_its_own() -> None:
    ended: dict[str, Any] = {}

    async def run(*, task_status: TaskStatus[int]) -> None:
        ended["process"] = await _run_in_a_session_of_its_own(
            [sys.executable, "-c", "import time; time.sleep(0.5)"], stream_output=False, task_status=task_status)

    async with anyio.create_task_group() as group:
        pid = await group.start(run)
        os.kill(pid, signal.SIGTERM)  # as a stop to fleet serve's group that reached it before it left the group
        assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & STOP_SIGNALS, "fleet serve hears its signals"
    assert ended["process"].returncode == 0, "the process lived to hear it (it never listens here)"


def test_the_runs_process_hears_a_sigterm_held_at_its_fork_as_a_stop_while_starting_and_no_ctrl_c() -> None:
    code = ("import os, signal\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})\n"
            "os.kill(os.getpid(), signal.SIGTERM); os.kill(os.getpid(), signal.SIGINT)  # held, as at the fork\n"
            "from deployments.flow_run_process import SigtermWhileImporting, hear_signals\n"
            "sigterm = SigtermWhileImporting()\n"
            "hear_signals()\n"
            "print(sigterm.came, signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.split() == ["True", "True"], done.stdout + done.stderr
