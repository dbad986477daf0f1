"""Stopping `fleet serve` at any moment, as a terminal's Ctrl-C and systemd's stop do, and starting it again.

A real `prefect server start`, an emulated dashboard on a real socket (nights of about 20 s), a local chat-shaped
webhook receiver behind the `FLEET_NOTIFY_BLOCK` custom-webhook block, and `fleet serve` as its own process (the
nightly deployment every 30 s, the runner polling every second, `FLEET_CATCH_UP_HOURS=0`), stopped again and again
by SIGINT (a terminal's Ctrl-C) or SIGTERM (systemd's stop), sent to its whole process group: a third of the stops
within its first 5 s (its imports, its checks, its registrations), a third the moment a night turns Pending (the
runner submitting it), a third while a night runs. Each stop is followed by the next start, as `systemctl restart`
does. Checked from outside, after every stop: every served deployment paused, no run left Pending or Running, no
flow-run process left, no run Crashed and no "crashed" alert in the chat; how each night the stop reached ended
(Prefect's state and message); on the next start, that the night was run again (the catch-up run, Completed) and
that the journal (the state database's `runs`) shows the stopped night accounted for by it.

Issue 44 saw 4 of 7 stops at a night's submission kill that night, the chat told "run ... crashed ... SIGTERM"
while Prefect showed it Cancelled, and a night stopped or killed never run again.

Run: `python bench/serve_stops.py [--stops 50] [--seed 0] [--output DIR]` (about a minute a stop). Prints a row per
stop, then the totals; writes bench/results/serve_stops.json. Exit 1 when any stop left something behind.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path[0] == str(Path(__file__).resolve().parent):  # run as a script: bench/emulator.py would shadow `emulator`
    sys.path[0] = str(ROOT)

import httpx  # noqa: E402 - after the path fix above

from bench.soak import FleetView, next_patch  # noqa: E402
from cli.demo import dashboard_environment  # noqa: E402
from cli.local_prefect import LocalPrefectServer, command_path  # noqa: E402
from emulator.config import EmulatorConfig  # noqa: E402
from emulator.testing import EmulatorServer  # noqa: E402

SERVE_SETTINGS = {"FLEET_SCHEDULE_INTERVAL_SECONDS": "30", "PREFECT_RUNNER_POLL_FREQUENCY": "1",
                  "FLEET_SCHEDULE_CHECK_SECONDS": "600", "FLEET_STOP_GRACE_SECONDS": "60", "FLEET_CATCH_UP_HOURS": "0"}
SERVER_SETTINGS = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2"}
NIGHTLY = "nightly-maintenance/nightly"
NOTIFY = "custom-webhook/ops"
KINDS = ("starting", "submission", "running")
# orchestration/serve_stop.py: how a stopped run is said
CANCELLED_BY_THE_STOP = "cancelled by the stop of `fleet serve`"
NIGHT_SECONDS = 240  # the longest a night is waited for


class ChatReceiver(ThreadingHTTPServer):
    """A local chat-shaped webhook receiver: what a custom-webhook block posted (`{"text": ...}`), in order."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Post)
        self.received: list[dict[str, str]] = []

    def texts(self) -> list[str]:
        return [posted.get("text", "") for posted in self.received]


class _Post(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["content-length"]))
        self.server.received.append(json.loads(body))  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def chat_receiver() -> Iterator[ChatReceiver]:
    receiver = ChatReceiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        yield receiver
    finally:
        receiver.shutdown()


def save_chat_block(server: LocalPrefectServer, receiver: ChatReceiver) -> None:
    """The `custom-webhook/ops` block, saved on the server as an operator saves it, posting to the receiver."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: server.api_url}):
        CustomWebhookNotificationBlock(name="ops", url=f"http://127.0.0.1:{receiver.server_port}/ops",
                                       json_data={"subject": "{{subject}}", "text": "{{body}}"}).save("ops")


# One client for every call to the server (loopback HTTP): a new one for each loaded the CA bundle, 13 ms of CPU,
# and the waits below ask many times a second
_API = httpx.Client(timeout=30)


def api(server: LocalPrefectServer, path: str, body: dict[str, Any] | None = None, attempts: int = 5) -> Any:
    """A call to the server's API; a busy server's 503 or silence (its database locked by a long write) is tried
    again."""
    for attempt in range(attempts):
        try:
            answer = _API.post(f"{server.api_url}{path}", json=body or {})
        except httpx.TimeoutException:
            if attempt == attempts - 1:
                raise
            continue
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


def runs_in(server: LocalPrefectServer, *states: str) -> list[dict[str, Any]]:
    return api(server, "/flow_runs/filter", {"flow_runs": {"state": {"type": {"any_": list(states)}}},
                                             "sort": "EXPECTED_START_TIME_ASC"})


def nightly_runs(server: LocalPrefectServer, *states: str, name: str | None = None) -> list[dict[str, Any]]:
    """The nightly flow's runs, oldest first: those in `states` or of that `name` only, when given, chosen by the
    server. A 30 s schedule keeps a hundred runs scheduled ahead: the waits below, asking many times a second,
    had the server read and send all of them each time, most of its CPU."""
    body: dict[str, Any] = {"flows": {"name": {"any_": [NIGHTLY.split("/")[0]]}}, "sort": "EXPECTED_START_TIME_ASC"}
    runs = body["flow_runs"] = {}
    if states:
        runs["state"] = {"type": {"any_": list(states)}}
    if name is not None:
        runs["name"] = {"any_": [name]}
    return api(server, "/flow_runs/filter", body)


def trigger(server: LocalPrefectServer, name: str) -> str:
    """A manual run of the deployment, as `prefect deployment run` creates it; its id."""
    found = deployments(server)[name]
    return api(server, f"/deployments/{found['id']}/create_flow_run", {})["id"]


def state_of(server: LocalPrefectServer, run_id: str) -> str | None:
    answer = _API.get(f"{server.api_url}/flow_runs/{run_id}")
    answer.raise_for_status()
    state = answer.json().get("state") or {}
    return state.get("type")


def started_since(run: dict[str, Any], moment: float) -> bool:
    """Began (Running) after `moment`."""
    return bool(run.get("start_time")) and datetime.fromisoformat(run["start_time"]).timestamp() >= moment


def message_of(run: dict[str, Any]) -> str:
    return (run.get("state") or {}).get("message") or ""


def wait_until(condition: Callable[[], Any], timeout: float, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(step)
    return None


def serving_started(output: Path) -> bool:
    return "serving report/report" in output.read_text(errors="replace")


def start_serving(server: LocalPrefectServer, dashboard: dict[str, str], directory: Path,
                  **settings: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`fleet serve` in a session of its own (its process group is what a terminal or systemd signals)."""
    output = directory / f"serve-{time.monotonic_ns()}.log"
    env = server.environment(COLUMNS="200", FLEET_HOME=str(directory / "home"),
                             FLEET_REPORT_DIR=str(directory / "reports"), **dashboard, **settings)
    with output.open("wb") as log:
        process = subprocess.Popen([command_path("fleet"), "serve"], env=env, cwd=directory, stdout=log,  # noqa: S603
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return process, output


def stop_group(process: subprocess.Popen[bytes], signum: signal.Signals, timeout: float) -> tuple[int | None, float]:
    """The signal to the whole process group, as a terminal's Ctrl-C or `kill -TERM -PGID` sends it; the exit
    code (None: killed after `timeout`) and the seconds it took."""
    began = time.monotonic()
    os.killpg(process.pid, signum)
    try:
        code: int | None = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        code = None
    return code, time.monotonic() - began


def flow_run_processes(home: Path) -> list[int]:
    """Processes of this bench's flow runs still alive (their environment names its FLEET_HOME)."""
    marker = f"FLEET_HOME={home}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker in environ.read_bytes().split(b"\0") and b"flow_run_process" in \
                    environ.with_name("cmdline").read_bytes():
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def journal(home: Path) -> dict[str, dict[str, Any]]:
    """The journal's runs (the `runs` table of the state databases under the home, wherever a dashboard's memory
    is kept): night run id -> finished, accounted for by."""
    found: dict[str, dict[str, Any]] = {}
    for path in home.rglob("*.sqlite"):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            try:
                rows = db.execute("SELECT run_id, finished_at, accounted_by FROM runs").fetchall()
            except sqlite3.OperationalError:  # not a journal
                continue
        found |= {run_id: {"finished": finished is not None, "accounted_by": by} for run_id, finished, by in rows}
    return found


def night_of(flow_run_id: str, rows: dict[str, dict[str, Any]]) -> str | None:
    """The journal's run of a flow run: a night's run id ends with its flow run's last 8 hex digits."""
    return next((run_id for run_id in rows if run_id.endswith(flow_run_id.replace("-", "")[-8:])), None)


def new_releases(emulator: EmulatorServer) -> int:
    """Every plugin not offered an update yet is offered its next patch release: each night has work (an update
    call per site and cohort step) for a stop to reach. This bench found that a release of an item a stopped
    night updated, offered before the night ran again, made that night fail (`MissingItems: ... two outcomes`);
    each run's outcome now stands beside the other's (tests/pipeline/test_reconcile.py)."""
    def admin(method: str, route: str, body: dict[str, Any] | None = None) -> Any:
        answer = httpx.request(method, f"{emulator.root_url}/__emulator__/{route}", json=body, timeout=60,
                               headers={"X-Emulator-Token": emulator.credentials["admin_token"]})
        answer.raise_for_status()
        return answer.json()

    view = FleetView.read(admin("GET", "state"))
    offered = 0
    for (site_id, kind, slug), version in view.versions.items():
        if kind == "plugin" and (site_id, kind, slug) not in view.offers and "mainwp-child" not in slug:
            admin("POST", "offers", {"site_id": site_id, "type": kind, "slug": slug, "version": next_patch(version)})
            offered += 1
    return offered


@dataclass
class StoppedNight:
    """A nightly run the stop reached, how it ended, and what the next start did about it."""

    run: str
    flow_run_id: str
    state: str
    message: str
    journalled: bool = False  # it had started in the journal (it may have applied something)
    rerun: str | None = None  # the catch-up run that ran the night again, Completed
    accounted: bool = False  # its journal run finished or accounted for by a later run (or it never started one)


@dataclass
class Stop:
    """One stop of `fleet serve` and what it left."""

    number: int
    kind: str
    moment: str
    signal: str
    exit_code: int | None = None
    exit_seconds: float = 0.0
    was_serving: bool = False
    said_stopped: bool = False
    deployments: int = 0
    active: list[str] = field(default_factory=list)  # served deployments left unpaused
    left: list[str] = field(default_factory=list)  # runs left Pending or Running
    processes: int = 0  # flow-run processes still alive
    crashed: list[str] = field(default_factory=list)  # runs Crashed
    crashed_alerts: list[str] = field(default_factory=list)  # chat texts saying crashed
    nights: list[StoppedNight] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Nothing left behind and nothing said crashed; a process that was serving said it stopped and exited 0
        (one stopped before it registered anything leaves nothing, whatever its exit code)."""
        left = self.active or self.left or self.processes or self.crashed or self.crashed_alerts
        return not left and (not self.was_serving or (self.exit_code == 0 and self.said_stopped))

    @property
    def settled(self) -> bool:
        """Every night it stopped ran again on the next start and its journal was accounted for."""
        return all(night.rerun and night.accounted for night in self.nights)


@dataclass
class Bench:
    server: LocalPrefectServer
    emulator: EmulatorServer
    chat: ChatReceiver
    directory: Path
    stops: list[Stop] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.directory / "home"

    def start(self) -> tuple[subprocess.Popen[bytes], Path, float]:
        process, output = start_serving(self.server, dashboard_environment(self.emulator.credentials), self.directory,
                                        FLEET_NOTIFY_BLOCK=NOTIFY,
                                        **SERVE_SETTINGS)
        return process, output, time.time()

    def settle(self, began: float, output: Path) -> None:
        """On this start: the nights the last stops reached, run again (by the catch-up run, or by the schedule
        when the stopped night's time had not come: the runner takes a run up to 10 s early) and Completed, and
        their journal accounted for."""
        owed = [night for stop in self.stops for night in stop.nights if not night.rerun]
        if not owed:
            return
        again = wait_until(lambda: next((run for run in nightly_runs(self.server, "COMPLETED")
                                         if started_since(run, began)), None), NIGHT_SECONDS, 0.5)
        if again is None:
            raise RuntimeError(f"no night run again and Completed on this start:\n"
                               f"{output.read_text(errors='replace')[-3000:]}")
        rows = journal(self.home)
        for night in owed:
            night.rerun = again["name"] + (" (catch-up)" if "catch-up" in again["tags"] else " (scheduled)")
            mine = night_of(night.flow_run_id, rows)
            night.accounted = mine is None or rows[mine]["finished"] or rows[mine]["accounted_by"] is not None

    def once(self, number: int, kind: str, chosen: random.Random) -> Stop:
        signum = signal.SIGINT if number % 2 else signal.SIGTERM
        process, output, began = self.start()
        try:
            if kind == "starting":
                delay = chosen.uniform(0.0, 5.0)
                time.sleep(max(0.0, began + delay - time.time()))
                moment = f"start +{delay:.1f} s"
            else:
                if not wait_until(lambda: serving_started(output) or process.poll() is not None, 180, 0.05) \
                        or process.poll() is not None:
                    raise RuntimeError(f"fleet serve did not start:\n{output.read_text(errors='replace')[-3000:]}")
                self.settle(began, output)
                new_releases(self.emulator)  # the night to come has work
                moment = self.night_reaches(kind, chosen, output, time.time())
            chat_before = len(self.chat.received)
            code, seconds = stop_group(process, signum, timeout=float(SERVE_SETTINGS["FLEET_STOP_GRACE_SECONDS"]) + 90)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        return self.observe(Stop(number, kind, moment, signum.name, code, seconds), output, began, chat_before)

    def night_reaches(self, kind: str, chosen: random.Random, output: Path, after: float) -> str:
        """Wait for the moment: a night turning Pending (the runner submitting it), or a night begun after `after`
        (the new releases) running for a random 0.5 to 10 s."""
        state = "PENDING" if kind == "submission" else "RUNNING"
        run = wait_until(lambda: next((run for run in nightly_runs(self.server, state)
                                       if state == "PENDING" or started_since(run, after)), None),
                         NIGHT_SECONDS, 0.02)
        if run is None:
            raise RuntimeError(f"no night turned {state}:\n{output.read_text(errors='replace')[-3000:]}")
        if kind == "submission":
            return f"{run['name']} pending"
        delay = chosen.uniform(0.5, 10.0)
        time.sleep(delay)
        return f"{run['name']} running +{delay:.1f} s"

    def observe(self, stop: Stop, output: Path, began: float, chat_before: int) -> Stop:
        printed = output.read_text(errors="replace")
        served = deployments(self.server)
        stop.was_serving = "\nserving " in f"\n{printed}"
        stop.said_stopped = "\nstopped: " in f"\n{printed}"
        stop.deployments = len(served)
        stop.active = sorted(name for name, found in served.items() if not found["paused"])
        stop.left = [f"{run['name']} {run['state_type']}" for run in runs_in(self.server, "PENDING", "RUNNING")]
        wait_until(lambda: not flow_run_processes(self.home), 10, 0.2)
        stop.processes = len(flow_run_processes(self.home))
        stop.crashed = [f"{run['name']}: {message_of(run)}" for run in runs_in(self.server, "CRASHED")]
        stop.crashed_alerts = [text for text in self.chat.texts()[chat_before:] if "rash" in text]
        rows = journal(self.home)
        for run in nightly_runs(self.server):
            state = run.get("state") or {}
            stamp = datetime.fromisoformat(state["timestamp"]).timestamp() if state.get("timestamp") else 0
            if stamp >= began and (run["state_type"] == "CANCELLED" and message_of(run).startswith(
                    CANCELLED_BY_THE_STOP) or run["state_type"] == "CRASHED"):
                stop.nights.append(StoppedNight(run["name"], run["id"], run["state_type"], message_of(run),
                                                journalled=night_of(run["id"], rows) is not None))
        return stop


def how(night: StoppedNight) -> str:
    if night.state != "CANCELLED":
        return night.state
    for words, short in (("before it started", "before it started"), ("before its first call", "before a call"),
                         ("at a safe point", "at a safe point"), ("after its grace", "after the grace")):
        if words in night.message:
            return short
    return night.message[:40]


def row(stop: Stop) -> str:
    nights = "; ".join(f"{night.run} {how(night)}" + (f" -> {night.rerun}{'' if night.accounted else ' NOT ACCOUNTED'}"
                                                      if night.rerun else "") for night in stop.nights) or "-"
    left = stop.active + stop.left + stop.crashed + stop.crashed_alerts + [f"{stop.processes} process(es)"] * bool(
        stop.processes)
    return (f"{stop.number:>3}  {stop.kind:<10} {stop.moment:<32} {stop.signal:<7} exit {stop.exit_code!s:<4} "
            f"{stop.exit_seconds:5.1f} s  paused {stop.deployments - len(stop.active)}/{stop.deployments}  "
            f"{'ok' if stop.clean else 'LEFT: ' + ', '.join(left)}  nights: {nights}")


def run_stops(stops: int, seed: int, directory: Path, say: Callable[[str], None] = print) -> list[Stop]:
    """`stops` stops, a third of each kind in a random order, alternating SIGINT and SIGTERM; then one last start
    that runs the last stopped night again."""
    chosen = random.Random(seed)
    kinds = [KINDS[number % 3] for number in range(stops)]
    chosen.shuffle(kinds)
    with chat_receiver() as chat, EmulatorServer(EmulatorConfig(sites=10, time_scale=0.03)) as emulator, \
            LocalPrefectServer(directory / "prefect", SERVER_SETTINGS) as server:
        save_chat_block(server, chat)
        bench = Bench(server, emulator, chat, directory)
        for number, kind in enumerate(kinds, start=1):
            stop = bench.once(number, kind, chosen)
            bench.stops.append(stop)
            say(row(stop))
        process, output, began = bench.start()
        try:
            wait_until(lambda: serving_started(output) or process.poll() is not None, 180, 0.05)
            bench.settle(began, output)
        finally:
            stop_group(process, signal.SIGINT, 150)
        say("after the last start: " + "; ".join(f"{night.run} -> {night.rerun}" for night in bench.stops[-1].nights))
    return bench.stops


def totals(stops: list[Stop]) -> dict[str, Any]:
    nights = [night for stop in stops for night in stop.nights]
    return {
        "stops": len(stops),
        "by_kind": {kind: sum(stop.kind == kind for stop in stops) for kind in KINDS},
        "every_schedule_paused": sum(not stop.active for stop in stops),
        "clean": sum(stop.clean for stop in stops),
        "runs_left_pending_or_running": sum(len(stop.left) for stop in stops),
        "flow_run_processes_left": sum(stop.processes for stop in stops),
        "runs_crashed": sum(len(stop.crashed) for stop in stops),
        "crashed_alerts": sum(len(stop.crashed_alerts) for stop in stops),
        "nights_stopped": len(nights),
        "nights_by_how": {label: sum(how(night) == label for night in nights)
                          for label in sorted({how(night) for night in nights})},
        "nights_journalled": sum(night.journalled for night in nights),
        "nights_run_again_on_restart": sum(bool(night.rerun) for night in nights),
        "nights_run_again_by_catch_up": sum("catch-up" in (night.rerun or "") for night in nights),
        "nights_accounted_for": sum(night.accounted for night in nights),
        "exit_seconds_max": max((stop.exit_seconds for stop in stops), default=0.0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results")
    arguments = parser.parse_args()
    began = time.time()
    scratch = Path(tempfile.mkdtemp(prefix="serve-stops-"))
    results = run_stops(arguments.stops, arguments.seed, scratch)
    summed = totals(results)
    print()
    for key, value in summed.items():
        print(f"{key}: {value}")
    good = summed["clean"] == len(results) and all(stop.settled for stop in results)
    print(f"\n{summed['clean']} of {len(results)} stops left every schedule paused, nothing Pending or Running, no "
          f"process, nothing crashed; {summed['nights_run_again_on_restart']} of {summed['nights_stopped']} stopped "
          f"nights run again on the next start, {summed['nights_accounted_for']} accounted for")
    arguments.output.mkdir(parents=True, exist_ok=True)
    (arguments.output / "serve_stops.json").write_text(json.dumps({
        "settings": {"stops": arguments.stops, "seed": arguments.seed, **SERVE_SETTINGS, **SERVER_SETTINGS},
        "wall_s": time.time() - began, "totals": summed,
        "stops": [asdict(stop) | {"clean": stop.clean, "settled": stop.settled} for stop in results]}, indent=2))
    if good:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"what fleet serve printed, its home and the Prefect server's log are kept in {scratch}")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
