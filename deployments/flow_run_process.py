"""The process a flow run of `fleet serve` runs in: Prefect's engine (`python -m prefect.engine`), unless `fleet serve`
was stopped while the process started.

`fleet serve` starts it in a session of its own (a Ctrl-C at its terminal, or a signal to its process group, is
`fleet serve`'s to handle) and, on Linux, bound to its life: were `fleet serve` killed, its runs die with it, and
its next start finds them for what they are (`deployments.catch_up`). The engine's imports come first and the stop
is looked at last, just before the engine takes the run: a stop that comes during those seconds cancels the run
before it runs; one that comes later finds the run at its first safe point (`orchestration.serve_stop`). A SIGTERM
during those imports (Prefect's runner cancelling the run: it kills a process whose engine cannot answer yet) ends it
Cancelled too, not Crashed.

Run: `python -m deployments.flow_run_process` with Prefect's `PREFECT__FLOW_RUN_ID` (as the runner runs the engine).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import runpy
import signal
import sys
import warnings
from types import FrameType

PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when the thread that started it ends
STOPPED_WHILE_STARTING = "cancelled before it started: its process was stopped while it started"


class SigtermWhileImporting:
    """A SIGTERM while the imports run, noted (an import cut in two leaves modules half made) and obeyed after."""

    def __init__(self) -> None:
        self.came = False
        signal.signal(signal.SIGTERM, self.handle)

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.came = True

    def done(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the engine installs its own as it takes the run


def hear_signals() -> None:
    """Hear the signals `fleet serve` held while this process was forked (`deployments.serve`), once
    `SigtermWhileImporting` listens: a SIGTERM that came meanwhile is noted; a SIGINT was a Ctrl-C for
    `fleet serve`'s group, not this process's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.default_int_handler)


def die_with_the_parent() -> None:
    """SIGKILL when `fleet serve` ends without stopping its runs (it was killed): never a night left running alone."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended before the binding took
        os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    die_with_the_parent()
    sigterm = SigtermWhileImporting()
    hear_signals()
    import prefect.engine  # noqa: F401 - the engine's imports and the flows' before the last look at the stop
    import prefect.flow_engine  # noqa: F401

    import flows.update  # noqa: F401 - the night's sentence, under every deployment that writes
    from orchestration.serve_stop import BEFORE_IT_STARTED, cancel_this_run, stop_requested

    sigterm.done()
    if stop_requested() or sigterm.came:
        asyncio.run(cancel_this_run(BEFORE_IT_STARTED if stop_requested() else STOPPED_WHILE_STARTING))
        return
    # imported above (it comes with prefect.flow_engine): run as a script all the same, as `python -m` runs it
    warnings.filterwarnings("ignore", message="'prefect.engine' found in sys.modules", category=RuntimeWarning)
    runpy.run_module("prefect.engine", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
