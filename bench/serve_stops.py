"""Stopping `fleet serve` at random moments: every time, every schedule paused and no run left Pending.

A real `prefect server start`, an emulated dashboard on a real socket, and `fleet serve` as its own process (the
nightly deployment on a 30 s interval, the runner polling every second), stopped again and again: at a random
moment while it starts or once it serves, or the moment a manually triggered run turns Pending (the runner is
submitting it), by SIGINT (Ctrl-C) or SIGTERM (systemd). After each stop it reads Prefect's API: every served
deployment paused, no flow run of them Pending, no auto-scheduled run left Scheduled; and what `fleet serve` said
and its exit code.

Issue 38 saw 1 stop in 5 during a run's submission leave the schedule on, 99 runs scheduled and one run Pending for
good.

Run: `python bench/serve_stops.py [--stops 20] [--seed 0] [--output DIR]` (about 15 s a stop). Prints a row per
stop, then the totals; writes bench/results/serve_stops.json. Exit 1 when any stop left something behind.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path[0] == str(Path(__file__).resolve().parent):  # run as a script: bench/emulator.py would shadow `emulator`
    sys.path[0] = str(ROOT)

import httpx  # noqa: E402 - after the path fix above

from cli.demo import dashboard_environment  # noqa: E402
from cli.local_prefect import LocalPrefectServer, command_path  # noqa: E402
from emulator.config import EmulatorConfig  # noqa: E402
from emulator.testing import EmulatorServer  # noqa: E402

SERVE_SETTINGS = {"FLEET_SCHEDULE_INTERVAL_SECONDS": "30", "PREFECT_RUNNER_POLL_FREQUENCY": "1",
                  "FLEET_SCHEDULE_CHECK_SECONDS": "600"}
SERVER_SETTINGS = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2"}
MANUAL = "sync-fleet/sync_fleet"


@dataclass
class Stop:
    """One stop of `fleet serve` and what it left."""

    number: int
    moment: str  # "start +3.2 s", "serving +1.0 s" or "run pending"
    signal: str
    exit_code: int | None
    paused: int
    active: list[str] = field(default_factory=list)  # deployments left unpaused
    pending: list[str] = field(default_factory=list)  # runs left Pending
    scheduled: int = 0  # auto-scheduled runs left Scheduled
    was_serving: bool = False  # it had registered a deployment: then it must stop saying so, exit 0
    said_stopped: bool = False

    @property
    def clean(self) -> bool:
        """Nothing left behind; and a process that was serving said it stopped and exited 0 (one stopped while
        Python was still starting leaves nothing, whatever its exit code)."""
        left = self.active or self.pending or self.scheduled
        return not left and (not self.was_serving or (self.exit_code == 0 and self.said_stopped))


def api(server: LocalPrefectServer, path: str, body: dict[str, Any] | None = None, attempts: int = 5) -> Any:
    """A call to the server's API; a busy server's 503 (its database locked by a long write) is tried again."""
    for attempt in range(attempts):
        answer = httpx.post(f"{server.api_url}{path}", json=body or {}, timeout=30)
        if answer.status_code != 503 or attempt == attempts - 1:
            break
        time.sleep(1 + attempt)
    answer.raise_for_status()
    return answer.json() if answer.content else None


def deployments(server: LocalPrefectServer) -> dict[str, dict[str, Any]]:
    """The served deployments by `flow/deployment` name."""
    served = api(server, "/deployments/filter")  # before the flows: a deployment's flow is registered first
    flows = {flow["id"]: flow["name"] for flow in api(server, "/flows/filter")}
    return {f"{flows[found['flow_id']]}/{found['name']}": found for found in served}


def runs_in(server: LocalPrefectServer, state: str) -> list[dict[str, Any]]:
    return api(server, "/flow_runs/filter", {"flow_runs": {"state": {"type": {"any_": [state]}}}})


def trigger(server: LocalPrefectServer, name: str) -> str:
    """A manual run of the deployment, as `prefect deployment run` creates it; its id."""
    found = deployments(server)[name]
    return api(server, f"/deployments/{found['id']}/create_flow_run", {})["id"]


def state_of(server: LocalPrefectServer, run_id: str) -> str | None:
    answer = httpx.get(f"{server.api_url}/flow_runs/{run_id}", timeout=30)
    answer.raise_for_status()
    state = answer.json().get("state") or {}
    return state.get("type")


def start_serving(server: LocalPrefectServer, dashboard: dict[str, str], directory: Path
                  ) -> tuple[subprocess.Popen[bytes], Path]:
    output = directory / f"serve-{time.monotonic_ns()}.log"
    env = server.environment(COLUMNS="200", FLEET_HOME=str(directory / "home"),
                             FLEET_REPORT_DIR=str(directory / "reports"), **dashboard, **SERVE_SETTINGS)
    with output.open("wb") as log:
        process = subprocess.Popen([command_path("fleet"), "serve"], env=env, cwd=directory, stdout=log,  # noqa: S603
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return process, output


def wait_until(condition: Any, timeout: float, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(step)
    return None


def serving_started(output: Path) -> bool:
    return "serving nightly-maintenance/nightly" in output.read_text(errors="replace")


def stop_once(server: LocalPrefectServer, dashboard: dict[str, str], directory: Path, number: int, *,
              at_submission: bool, delay: float, signum: signal.Signals, once_serving: bool = False
              ) -> tuple[Stop, str]:
    """Start `fleet serve`, stop it at the moment asked (a triggered run's submission, `delay` seconds after it
    began serving, or after its process started), and read what it left; also returns what it printed."""
    process, output = start_serving(server, dashboard, directory)
    try:
        if (at_submission or once_serving) and not wait_until(lambda: serving_started(output), 180, 0.02):
            raise RuntimeError(f"fleet serve did not start:\n{output.read_text(errors='replace')[-3000:]}")
        if once_serving:
            time.sleep(delay)
            moment = f"serving +{delay:.1f} s"
        elif at_submission:
            wait_until(lambda: MANUAL in deployments(server), 60, 0.2)
            run_id = trigger(server, MANUAL)
            if not wait_until(lambda: state_of(server, run_id) in ("PENDING", "RUNNING", "COMPLETED"), 60, 0.02):
                raise RuntimeError("the triggered run was never submitted")
            moment = f"run {state_of(server, run_id).lower()}"
        else:
            time.sleep(delay)
            moment = f"start +{delay:.1f} s"
        os.killpg(process.pid, signum)
        try:
            code: int | None = process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    printed = output.read_text(errors="replace")
    served = deployments(server)
    stop = Stop(
        number=number, moment=moment, signal=signum.name, exit_code=code,
        paused=sum(1 for found in served.values() if found["paused"]),
        active=sorted(name for name, found in served.items() if not found["paused"]),
        pending=[run["name"] for run in runs_in(server, "PENDING")],
        scheduled=sum(1 for run in runs_in(server, "SCHEDULED") if run.get("auto_scheduled")),
        was_serving="serving " in printed,
        said_stopped="stopped" in printed,
    )
    return stop, printed


def run_stops(stops: int, seed: int, directory: Path) -> list[Stop]:
    """`stops` stops at random moments, alternating SIGINT and SIGTERM: a third at a run's submission, a third at
    a random moment once it serves (its registrations, its first polls), a third while it starts (its imports,
    the pre-flight)."""
    chosen = random.Random(seed)
    results = []
    with EmulatorServer(EmulatorConfig(sites=3, time_scale=0.001)) as emulator, \
            LocalPrefectServer(directory / "prefect", SERVER_SETTINGS) as server:
        dashboard = dashboard_environment(emulator.credentials)
        for number in range(1, stops + 1):
            kind = chosen.choice(("submission", "serving", "starting"))
            stop, printed = stop_once(server, dashboard, directory, number, at_submission=kind == "submission",
                                      once_serving=kind == "serving",
                                      delay=chosen.uniform(0.0, 6.0) if kind == "serving" else chosen.uniform(0.5, 10),
                                      signum=signal.SIGINT if number % 2 else signal.SIGTERM)
            results.append(stop)
            print(f"{stop.number:>3}  {stop.moment:<14} {stop.signal:<8} exit {stop.exit_code!s:<5} "
                  f"paused {stop.paused}  active {stop.active or '-'}  pending {stop.pending or '-'}  "
                  f"scheduled {stop.scheduled}  {'ok' if stop.clean else 'LEFT SOMETHING'}", flush=True)
            if not stop.clean:
                print(printed[-2000:], flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="serve-stops-") as scratch:
        results = run_stops(arguments.stops, arguments.seed, Path(scratch))
    clean = sum(stop.clean for stop in results)
    print(f"\n{clean} of {len(results)} stops left every schedule paused, no run Pending, no run scheduled")
    arguments.output.mkdir(parents=True, exist_ok=True)
    (arguments.output / "serve_stops.json").write_text(json.dumps(
        {"stops": [asdict(stop) | {"clean": stop.clean} for stop in results], "clean": clean}, indent=2))
    return 0 if clean == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
