"""Visual check benchmark: page checks per minute on this machine and peak memory, against `fleet emulator serve`
(in its own process) serving the sites' real pages.

A page check is one page at one viewport judged after an update: two baseline shots, the shot after, the diff.
The benchmark takes the home page plus sitemap pages of N healthy sites at each viewport, shoots the first
baseline of every page, the second after the policy's gap, breaks one site in ten visually (CSS gone or a
section blank, through the ground truth), shoots every page again and judges it. Memory: the peak RSS of this
process (Playwright's driver runs beside it, counted with Chromium) and the peak of the summed proportional set
size (PSS: shared pages split between the processes sharing them) of Chromium's and the driver's processes,
sampled every 100 ms from /proc.

Run: `python bench/visual.py [--sites 20] [--sitemap-pages 2] [--viewports desktop mobile] [--concurrency 3]`.
Prints a table and writes bench/results/visual.json. Target: at least 30 page checks per minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the script's own directory would shadow the `emulator` package

from bench.emulator import start_server, stop_server  # noqa: E402

TARGET_PER_MINUTE = 30


def _children() -> dict[int, int]:
    """pid -> parent pid of every process on the machine."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _pss(pid: int) -> int:
    """Proportional set size: Chromium's processes share most of their pages, which summed RSS counts again each."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


class BrowserMemory:
    """The peak of the summed PSS of this process's descendants but the emulator (Playwright's driver, Chromium)."""

    def __init__(self, excluded: int) -> None:
        self.excluded = excluded
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.1):
            parents = _children()
            family, frontier = set(), {me}
            while frontier:
                frontier = {pid for pid, parent in parents.items() if parent in frontier and pid != self.excluded}
                family |= frontier
            self.peak = max(self.peak, sum(_pss(pid) for pid in family))

    def __enter__(self) -> BrowserMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def run(sites: int, sitemap_pages: int, viewports: list[str], concurrency: int, work: Path,
              emulator_pid: int, credentials: dict) -> dict:
    from fleet.visual.capture import PageCapture
    from fleet.visual.pages import pages_to_check
    from fleet.visual.policy import VisualPolicy
    from fleet.visual.verdict import judge_pages

    policy = VisualPolicy(sitemap_pages=sitemap_pages, viewports=viewports)
    admin = {"X-Emulator-Token": credentials["admin_token"]}
    root = credentials["dashboard_url"]
    async with httpx.AsyncClient(base_url=root, timeout=60) as http:
        truth = (await http.get("/__emulator__/state", headers=admin)).json()["sites"]
        healthy = [s for s in truth.values() if s["reachable"] and s["front_end"]["status"] == "up"][:sites]
        homes = {s["url"].split("://", 1)[-1].rstrip("/"): s for s in healthy}
        pages = {domain: await pages_to_check(http, credentials["site_url_template"].format(host=domain), policy)
                 for domain in homes}
        checks = sum(len(p) for p in pages.values()) * len(policy.viewports)
        with BrowserMemory(emulator_pid) as memory:
            started = time.perf_counter()
            async with PageCapture(work, concurrency=concurrency) as capture:
                launched = time.perf_counter()
                first = await capture.shoot_sites(pages, policy.viewports, "before")
                first_done = time.perf_counter()
                await asyncio.sleep(max(0.0, policy.baseline_gap_seconds - (first_done - launched)))
                second = await capture.shoot_sites(pages, policy.viewports, "before-2")
                broken = list(homes)[::10]
                for n, domain in enumerate(broken):
                    await http.post("/__emulator__/faults/visual", headers=admin,
                                    json={"site_id": homes[domain]["id"], "mode": ("css", "blank")[n % 2]})
                after = await capture.shoot_sites(pages, policy.viewports, "after")
                shot = time.perf_counter()
                verdicts = judge_pages(first, second, after, policy)
                judged = time.perf_counter()
    wall = judged - launched
    bands = Counter(str(v.band) for v in verdicts)
    missed = [v for v in verdicts if v.site in broken and str(v.band) != "broken"]
    false_alarms = [v for v in verdicts if v.site not in broken and str(v.band) != "healthy"]
    return {
        "sites": len(homes), "viewports": len(policy.viewports), "pages_per_site": round(checks / len(homes) /
                                                                                       len(policy.viewports), 1),
        "concurrency": concurrency, "page_checks": checks, "shots": 3 * checks,
        "browser_start_s": round(launched - started, 2), "shoot_s": round(shot - launched, 1),
        "diff_s": round(judged - shot, 1), "wall_s": round(wall, 1),
        "checks_per_min": round(checks / wall * 60, 1), "shots_per_min": round(3 * checks / wall * 60, 1),
        "peak_rss_python_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "peak_pss_browser_mb": round(memory.peak / 2**20, 1),
        "bands": dict(bands), "broken_sites": len(broken), "missed": len(missed), "false_alarms": len(false_alarms),
        "shot_errors": sum(1 for s in first + second + after if s.error),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=20)
    parser.add_argument("--sitemap-pages", type=int, default=0)
    parser.add_argument("--viewports", nargs="+", default=["desktop", "mobile"])
    parser.add_argument("--concurrency", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        credentials_file = Path(tmp) / "credentials.json"
        emulator, _ = start_server(max(args.sites * 2, 50), credentials_file, extra=("--seed", "1"))
        try:
            credentials = json.loads(credentials_file.read_text())
            row = asyncio.run(run(args.sites, args.sitemap_pages, args.viewports, args.concurrency, Path(tmp) / "run",
                                  emulator.pid, credentials))
        finally:
            stop_server(emulator)
    row["cpus"] = os.cpu_count()
    width = max(len(k) for k in row)
    for key, value in row.items():
        print(f"{key:<{width}}  {value}")
    verdict = "meets" if row["checks_per_min"] >= TARGET_PER_MINUTE else "misses"
    print(f"{verdict} the target of {TARGET_PER_MINUTE} page checks per minute")
    out = ROOT / "bench" / "results" / "visual.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                               "target_checks_per_min": TARGET_PER_MINUTE, "rows": [row]}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
