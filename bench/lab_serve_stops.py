"""`fleet serve` stopped and killed mid-night against the real MainWP lab (../shared/lab: MainWP Dashboard 6.1.2 and
two real children), by hand. The lab's canary 1.1 (a harmless real release) is offered on both children with the
lab's planted fakes, and `fleet serve` runs the night on a real `prefect server start`:

1. stopped (SIGINT to its process group, a terminal's Ctrl-C) once the night has sent an update call: the night
   ends Cancelled at a safe point, every call it sent answered and journalled;
2. started again: the night it stopped runs once (the catch-up), accounts for what the stopped one applied, and
   completes;
3. the canary offered again (back to 1.0), the next night's process SIGKILLed once its first update has landed
   (the canary's file on a child reads 1.1) while `fleet serve` goes on: the next scheduled night takes the night
   lock, accounts for that update as the killed night's, and completes. (Killed the moment its call was journalled,
   the night may die before the call leaves: then nothing landed, and the next night applies it as its own.)

Measured: each night's end state and message, the calls the stopped night sent (each answered?), the items the
next night accounted for and the canary's version on each child at the end. Needs a built lab
(`LAB_DIR=/work/lab ../shared/lab/build.sh`) and root (the canary's zips are served on port 80). Run:
`python bench/lab_serve_stops.py --lab /work/lab --scripts ../shared/lab`; prints a table and writes
bench/results/lab_serve_stops.json.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lab import lab_arguments, lab_dashboard, serve_canary, sh  # noqa: E402
from bench.serve_stops import (  # noqa: E402
    SERVER_SETTINGS,
    flow_run_processes,
    journal,
    night_of,
    nightly_runs,
    serving_started,
    start_serving,
    stop_group,
    wait_until,
)
from cli.local_prefect import LocalPrefectServer  # noqa: E402

SETTINGS = {"FLEET_SCHEDULE_INTERVAL_SECONDS": "90", "PREFECT_RUNNER_POLL_FREQUENCY": "1",
            "FLEET_SCHEDULE_CHECK_SECONDS": "600", "FLEET_STOP_GRACE_SECONDS": "60", "FLEET_CATCH_UP_HOURS": "0"}
CANARY = "lab-canary/lab-canary.php"
VERSION = re.compile(r"Version:\s*([0-9.]+)")


def canary_versions(lab: Path) -> dict[str, str]:
    found = {}
    for child in ("child1", "child2"):
        try:
            text = (lab / "sites" / child / "wp-content" / "plugins" / "lab-canary" / "lab-canary.php").read_text()
        except OSError:  # mid-upgrade: WordPress removes the old folder before it unpacks the new one
            text = ""
        match = VERSION.search(text)
        found[child] = match.group(1) if match else "?"
    return found


def offer_the_canary(lab: Path, scripts: Path, env: dict[str, str]) -> None:
    sh(f"{scripts}/canary/reset.sh && {scripts}/canary/plant.sh child1 1.1 && {scripts}/canary/plant.sh child2 1.1 "
       f"&& {lab}/bin/plant-updates.sh >/dev/null && php {lab}/bin/php/lab-rest.php {lab}/run/keys.json sync", env)


def writing_night(server: LocalPrefectServer, home: Path, states: tuple[str, ...], after: float) -> dict[str, Any]:
    """The first night started after `after` in one of `states` that has journalled an update call."""
    def intents(run_id: str) -> bool:
        for path in (home / "dashboards").rglob("fleet-state.sqlite"):
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                if db.execute("SELECT 1 FROM intents WHERE run_id = ? AND kind = 'update'", (run_id,)).fetchone():
                    return True
        return False

    def found() -> dict[str, Any] | None:
        rows = journal(home)
        for run in nightly_runs(server, *states):
            night = night_of(run["id"], rows)
            if run["start_time"] and night and intents(night) and \
                    time.mktime(time.strptime(run["start_time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone >= after:
                return run | {"night": night}
        return None
    return wait_until(found, 600, 0.05)


def answered(home: Path, night: str) -> list[bool]:
    found: list[bool] = []
    for path in (home / "dashboards").rglob("fleet-state.sqlite"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            found += [bool(a) for (a,) in db.execute("SELECT answered FROM intents WHERE run_id = ?", (night,))]
    return found


def accounted(reports: Path, night: str) -> list[str]:
    for path in reports.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        if night in (summary.get("accounts_for") or []):
            return [f"site {i['site_id']} {i['slug']} {i['from_version']}->{i['to_version']}: {i['outcome']}"
                    for i in summary["items"] if i.get("applied_by_run") == night]
    return []


def main() -> int:
    lab, scripts, out = lab_arguments(__doc__.split("\n\n")[0], ROOT / "bench" / "results" / "lab_serve_stops.json")
    directory = Path(tempfile.mkdtemp(prefix="lab-serve-stops-"))
    home, reports = directory / "home", directory / "reports"
    home.mkdir()
    env = {**os.environ, "LAB_DIR": str(lab)}
    (home / "policy.yaml").write_text("min_age_days: 0\n")
    dashboard = lab_dashboard(lab, home / "policy.yaml")
    files = serve_canary(scripts, directory / "zips", ("1.0", "1.1"))
    rows: list[dict[str, Any]] = []
    started: list[subprocess.Popen[bytes]] = []
    try:
        with LocalPrefectServer(directory / "prefect", SERVER_SETTINGS) as server:
            def serve() -> tuple[subprocess.Popen[bytes], Path]:
                process, output = start_serving(server, dashboard, directory, **SETTINGS)
                started.append(process)
                if not wait_until(lambda: serving_started(output) or process.poll() is not None, 180, 0.1):
                    raise RuntimeError(output.read_text()[-3000:])
                return process, output

            offer_the_canary(lab, scripts, env)
            began = time.time()
            process, output = serve()
            night = writing_night(server, home, ("RUNNING",), began)
            code, seconds = stop_group(process, signal.SIGINT, 150)
            stopped = next(run for run in nightly_runs(server) if run["id"] == night["id"])
            rows.append({"what": "stopped (SIGINT) after its first update call", "run": night["name"],
                         "exit": code, "stop_s": round(seconds, 1), "state": stopped["state_type"],
                         "message": stopped["state"]["message"], "calls_answered": answered(home, night["night"])})
            began = time.time()
            process, output = serve()
            again = wait_until(lambda: next((run for run in nightly_runs(server) if run["state_type"] in (
                "COMPLETED", "FAILED", "CRASHED") and "catch-up" in run["tags"]), None), 600, 0.5)
            rows.append({"what": "the catch-up on the next start", "run": again and again["name"],
                         "state": again and again["state_type"], "accounted": accounted(reports, night["night"]),
                         "canary": canary_versions(lab)})

            offer_the_canary(lab, scripts, env)
            began = time.time()
            killed = writing_night(server, home, ("RUNNING",), began)
            landed = wait_until(lambda: [child for child, version in canary_versions(lab).items()
                                         if version == "1.1"], 300, 0.02)
            for pid in flow_run_processes(home):
                os.kill(pid, signal.SIGKILL)
            after = time.time()
            answered_at_kill = answered(home, killed["night"])
            crashed = wait_until(lambda: next(run for run in nightly_runs(server)
                                              if run["id"] == killed["id"])["state_type"] == "CRASHED", 120, 0.5)
            rows.append({"what": "SIGKILLed once its first update landed", "run": killed["name"],
                         "landed_on": landed, "calls_answered": answered_at_kill,
                         "crashed_in_prefect": bool(crashed), "serve_alive": process.poll() is None})
            nxt = wait_until(lambda: next((run for run in nightly_runs(server) if run["state_type"] in (
                "COMPLETED", "FAILED", "CRASHED") and run["start_time"] and run["id"] != killed["id"] and
                time.mktime(time.strptime(run["start_time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone >= after),
                None), 600, 0.5)
            rows.append({"what": "the next scheduled night", "run": nxt and nxt["name"],
                         "state": nxt and nxt["state_type"], "accounted": accounted(reports, killed["night"]),
                         "canary": canary_versions(lab), "lock_said": [line for line in output.read_text().splitlines()
                                                                      if "night lock" in line][-2:]})
            stop_group(process, signal.SIGINT, 150)
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        files.terminate()
        files.wait(10)
    for row in rows:
        print(json.dumps(row, indent=1))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "directory": str(directory)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
