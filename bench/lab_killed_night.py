"""A night killed right after it broke a real site, and the night after it, against the real MainWP lab
(../shared/lab: MainWP Dashboard 6.1.2 and two real children), by hand: the lab's canary 1.2 (a fatal at load: the
pages AND the MainWP Child die) offered to both children, `fleet nightly` started with one site per update call, and
its whole process group SIGKILLed (a reboot, an OOM kill) the moment a child's home page answers 500, before the
night probes it. Then `fleet nightly` again, as the next night; then the sites repaired by hand (the canary's 1.0
back, as an operator restores it) and a third night.

Measured: the children 1.2 reached by the killed run's calls (the dashboard finishes what it was sent) and by the
next night's own (the target: none), the next night's exit code and wall time, what it says of the broken children
(the break, its suspects and what was done), the canary's items (applied by the killed run, or held),
the holds and the incidents it opened; on the third night, whether the repaired sites are maintained again (MainWP
refuses a site whose sync failed as "child outdated" until it is reconnected) and the canary 1.2 held.

Needs a built lab (`LAB_DIR=/work/lab ../shared/lab/build.sh`) and root (the canary's zips are served on port
80, as the lab's README says). Run: `python bench/lab_killed_night.py --lab /work/lab --scripts ../shared/lab`.
Prints a table and writes bench/results/lab_killed_night.json.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # the checkout, for `bench.lab`

from bench.lab import CHECKOUT, FLEET, lab_arguments, lab_home, serve_canary, sh, sync_children  # noqa: E402

CHILDREN = {"child1": "http://127.0.0.1:8081/", "child2": "http://127.0.0.1:8082/"}
CANARY = "lab-canary/lab-canary.php"
VERSION = re.compile(r"^\s*\*?\s*Version:\s*(\S+)", re.M)


def canary_versions(lab: Path) -> dict[str, str | None]:
    """The canary's version on each child, read from its plugin file as WordPress reads it."""
    versions = {}
    for child in CHILDREN:
        path = lab / "sites" / child / "wp-content" / "plugins" / "lab-canary" / "lab-canary.php"
        found = VERSION.search(path.read_text()) if path.is_file() else None
        versions[child] = found.group(1) if found else None
    return versions


def kill_at_the_break(env: dict[str, str], log: Path, limit_s: float = 300) -> tuple[bool, float]:
    """`fleet nightly` killed with its process group when a child first answers 500 (one site per call, one call
    per child server at a time: the other child is not written to yet): (killed, seconds in)."""
    started = time.monotonic()
    with log.open("w") as output, httpx.Client(timeout=5) as http:
        night = subprocess.Popen([FLEET, "nightly", "--types", "plugin"], env=env, stdout=output,  # noqa: S603
                                 stderr=subprocess.STDOUT, start_new_session=True)
        while night.poll() is None and time.monotonic() - started < limit_s:
            statuses = []
            for url in CHILDREN.values():
                try:
                    statuses.append(http.get(url).status_code)
                except httpx.HTTPError:
                    statuses.append(0)
            if max(statuses) >= 500:
                os.killpg(night.pid, signal.SIGKILL)
                night.wait()
                return True, time.monotonic() - started
            time.sleep(0.05)
        if night.poll() is None:
            os.killpg(night.pid, signal.SIGKILL)
        night.wait()
    return False, time.monotonic() - started


def main() -> None:
    lab, scripts, out = lab_arguments(__doc__.splitlines()[0], CHECKOUT / "bench" / "results" / "lab_killed_night.json")
    home, env = lab_home(lab, "lab-killed-night", FLEET_SITES_PER_CALL="1")
    zips, reports = home / "zips", home / "reports"
    server = serve_canary(scripts, zips, ("1.0", "1.2"))
    try:
        sh(f"{scripts}/canary/reset.sh", env)
        sync_children(lab, env)
        for child in CHILDREN:
            sh(f"{scripts}/canary/plant.sh {child} 1.2", env)
        sh(f"php {lab}/bin/php/lab-rest.php {lab}/run/keys.json sync", env)
        killed, killed_after = kill_at_the_break(env, home / "killed-night.log")
        at_kill = canary_versions(lab)
        started = time.monotonic()
        night = subprocess.run([FLEET, "nightly", "--types", "plugin"], env=env, capture_output=True, text=True,
                               check=False)
        wall = time.monotonic() - started
        after = canary_versions(lab)
        pages = {child: httpx.get(url, timeout=10).status_code for child, url in CHILDREN.items()}
        sh(f"{scripts}/canary/reset.sh", env)  # the operator repairs the sites (1.0 back); 1.2 is still offered
        for child in CHILDREN:
            sh(f"{scripts}/canary/plant.sh {child} 1.2", env)
        third = subprocess.run([FLEET, "nightly", "--types", "plugin"], env=env, capture_output=True, text=True,
                               check=False)
    finally:
        server.terminate()
        server.wait(10)
        sh(f"{scripts}/canary/reset.sh", env)
        sync_children(lab, env)
    runs = sorted(path for path in reports.glob("*/summary.json") if not json.loads(path.read_text()).get(
        "interrupted"))
    summary = json.loads(runs[-2].read_text()) if len(runs) > 1 else {}
    repaired = json.loads(runs[-1].read_text()) if runs else {}
    result = {
        "killed": killed, "killed_after_s": round(killed_after, 1), "canary_at_kill": at_kill,
        "next_night_exit_code": night.returncode, "next_night_wall_s": round(wall, 1), "canary_after": after,
        "pages_after": pages, "accounts_for": summary.get("accounts_for"),
        "broken": [{"site": a["site_name"], "suspects": [f"{s['slug']} {s['to_version']}" for s in a["suspects"]],
                    "containment": (a.get("containment") or {}).get("status")} for a in summary.get("broken", [])],
        "canary_items": [{k: i.get(k) for k in ("site_id", "outcome", "applied_by_run", "reason")}
                         for i in summary.get("items", []) if i["slug"] == CANARY],
        "holds": [f"{h['slug']}@{h['version']} ({h['kind']})" for h in summary.get("holds", [])],
        "incidents": [(i["site_id"], i.get("status")) for i in summary.get("incidents", [])],
        "next_night_output_tail": night.stdout[-1500:] + night.stderr[-1500:],
        "third_night_exit_code": third.returncode,
        "third_night_sites": [{k: site.get(k) for k in ("site_name", "status", "revived", "updated")}
                              for site in repaired.get("sites", [])],
        "third_night_canary": [{k: i.get(k) for k in ("site_id", "outcome", "reason")}
                               for i in repaired.get("items", []) if i["slug"] == CANARY],
        "third_night_output_tail": third.stdout[-1500:] + third.stderr[-1500:],
    }
    names = {1: "child1", 2: "child2"}
    killed_run = [i["site_id"] for i in summary.get("items", []) if i["slug"] == CANARY and i.get("applied_by_run")]
    own = [i["site_id"] for i in summary.get("items", []) if i["slug"] == CANARY and not i.get("applied_by_run")
           and i["outcome"] in ("updated", "unknown", "failed")]
    result["written_by_the_killed_run"] = sorted(names[site] for site in killed_run)
    result["written_by_the_next_night"] = sorted(names[site] for site in own)
    print(f"{'':28}{'at the kill':>14}{'after the next night':>24}")
    for child in CHILDREN:
        print(f"{'lab-canary on ' + child:28}{str(at_kill[child]):>14}{str(after[child]):>24}")
    print(f"killed {killed} after {result['killed_after_s']} s (the dashboard works on what it was sent); 1.2 "
          f"written by the killed run to {result['written_by_the_killed_run']}, by the next night to "
          f"{result['written_by_the_next_night']} (target: none); next night: exit {night.returncode} in "
          f"{result['next_night_wall_s']} s, holds {result['holds']}; third night (repaired): exit "
          f"{third.returncode}, sites {result['third_night_sites']}")
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("_output_tail")}, indent=2))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
