"""The whole night against the real MainWP lab (../shared/lab: MainWP Dashboard 6.1.2 and two real children), by
hand: Fleet Guard installed on child 1, the lab's canary 1.2 (a fatal at load: the pages AND the MainWP Child
die) offered there, and `fleet nightly` run as an operator runs it. A poller reads child 1's home page every 50 ms
throughout, so the break and the revival are timed as a visitor sees them.

Measured: the night's exit code and wall time; the seconds from the break (the first 500 a visitor gets) to the
site up again (the first 200 after it: the culprit paused) and to the revival's end (the kept version active
again, as the night's containment says); the requests the revival sent to the dashboard and to the guard (the
night counts them), the guard requests the guard itself verified (the nonces it remembers); what the night says
(`containment`), the canary at the end, and the versions held (innocent ones: every hold that is not
lab-canary 1.2; the target is 0).

Needs a built lab (`LAB_DIR=/work/lab ../shared/lab/build.sh`) and root (the canary's zips are served on port
80, as the lab's README says). Run: `python bench/lab_revival.py --lab /work/lab --scripts ../shared/lab`.
Prints a table and writes bench/results/lab_revival.json.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import httpx

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the checkout, for `bench.lab`

from bench.lab import CHECKOUT, FLEET, lab_arguments, lab_home, serve_canary, sh  # noqa: E402

CHILD = "http://127.0.0.1:8081/"
COST = re.compile(r"\((\d+\.\d) s, (\d+) dashboard and (\d+) guard request")


class Poller(threading.Thread):
    """Child 1's home page every 50 ms: (monotonic time, wall time, status)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: list[tuple[float, float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=10) as http:
            while not self.stop.is_set():
                try:
                    status = http.get(CHILD).status_code
                except httpx.HTTPError:
                    status = 0
                self.seen.append((time.monotonic(), time.time(), status))
                time.sleep(0.05)

    def break_and_up(self) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
        broke = next(((m, w) for m, w, status in self.seen if status >= 500), None)
        if broke is None:
            return None, None
        up = next(((m, w) for m, w, status in self.seen if m > broke[0] and status == 200), None)
        return broke, up


def main() -> None:
    lab, scripts, out = lab_arguments(__doc__.splitlines()[0], CHECKOUT / "bench" / "results" / "lab_revival.json")
    home, env = lab_home(lab, "lab-revival")
    zips, reports = home / "zips", home / "reports"
    server = serve_canary(scripts, zips, ("1.0", "1.2"))
    try:
        sh(f"{scripts}/canary/reset.sh", env)
        sh(f"{FLEET} guard keygen && {FLEET} guard build --out {zips}/fleet-guard.zip", env)
        plugins = lab / "sites" / "child1" / "wp-content" / "plugins"
        with zipfile.ZipFile(zips / "fleet-guard.zip") as archive:
            archive.extractall(plugins)
        sh(f". {lab}/bin/lib.sh && wp_php child1 activate-plugin.php fleet-guard/fleet-guard.php", env)
        sh(f"{scripts}/canary/plant.sh child1 1.2 && php {lab}/bin/php/lab-rest.php {lab}/run/keys.json sync", env)
        status = subprocess.run([FLEET, "guard", "status", "--json"], env=env, capture_output=True, text=True)
        rows = json.loads(status.stdout[: status.stdout.rindex("]") + 1])
        poller = Poller()
        poller.start()
        started = time.monotonic()
        night = subprocess.run([FLEET, "nightly", "--sites", "1", "--types", "plugin"], env=env,
                               capture_output=True, text=True)
        wall = time.monotonic() - started
        time.sleep(1)
        poller.stop.set()
        poller.join()
    finally:
        server.terminate()
        server.wait(10)
    broke, up = poller.break_and_up()
    runs = sorted(reports.glob("*/summary.json"))
    summary = json.loads(runs[-1].read_text()) if runs else {}
    guard_state = next((lab / "sites").glob("fleet-guard-data-*/state.json"), None)
    nonces = len(json.loads(guard_state.read_text()).get("nonces", {})) if guard_state else None
    canary = next((i for i in summary.get("items", []) if i["slug"] == "lab-canary/lab-canary.php"), {})
    holds = [f"{h['slug']}@{h['version']} ({h['kind']})" for h in summary.get("holds", [])]
    containments = [a.get("containment") or {} for a in summary.get("broken", [])]
    cost = next((COST.search(c.get("detail", "")) for c in containments if COST.search(c.get("detail", ""))), None)
    result = {
        "exit_code": night.returncode, "night_wall_s": round(wall, 1),
        "guard_status": [(row["site_id"], row["answers"], row["verdict"]) for row in rows],
        "break_to_up_s": round(up[0] - broke[0], 2) if broke and up else None,
        "revival_s": float(cost.group(1)) if cost else None,
        "revival_dashboard_requests": int(cost.group(2)) if cost else None,
        "revival_guard_requests": int(cost.group(3)) if cost else None,
        "guard_requests_verified": nonces, "canary_item": {k: canary.get(k) for k in ("outcome", "from_version",
                                                                               "to_version", "reason")},
        "containment": containments,
        "holds": holds, "innocent_held": len([h for h in holds if not h.startswith("lab-canary/lab-canary.php@1.2")]),
        "night_output_tail": night.stdout[-1500:] + night.stderr[-1500:],
    }
    print(f"night: exit {result['exit_code']} in {result['night_wall_s']} s; break -> up (paused) "
          f"{result['break_to_up_s']} s; the revival {result['revival_s']} s with "
          f"{result['revival_dashboard_requests']} dashboard and {result['revival_guard_requests']} guard "
          f"requests ({nonces} verified by the guard); innocent releases held {result['innocent_held']}")
    print(json.dumps({k: v for k, v in result.items() if k != "night_output_tail"}, indent=2))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
