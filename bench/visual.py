"""Visual check benchmark: page checks per minute on this machine and peak memory, against `fleet emulator serve`
(in its own process) serving the sites' real pages.

A page check is one page at one viewport judged after an update: two baseline shots, the shot after, the diff.
The benchmark takes the home page plus sitemap pages of N healthy sites at each viewport, shoots the first
baseline of every page, the second after the policy's gap, breaks one site in ten visually (CSS gone or a
section blank, through the ground truth), shoots every page again and judges it. Memory: the peak RSS of this
process (Playwright's driver runs beside it, counted with Chromium) and the peak of the summed proportional set
size (PSS: shared pages split between the processes sharing them) of Chromium's and the driver's processes,
sampled every 100 ms from /proc.

Side by side in one run, each against an emulator of its own: the capture as the night runs it (each of the
`concurrency` slots keeps one page open and loads its pages one after another in it) and a new page for every shot
(what it did before: each new page is a new Chromium renderer process). Chromium's CPU is that of the browser's
processes, those that ended counted in the process that reaped them.

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


def _cpu_seconds(pid: int) -> float:
    """A process's CPU and that of the children it reaped (Chromium's zygote reaps the renderers)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


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
    """The peak of the summed PSS of this process's descendants but the emulator (Playwright's driver, Chromium),
    and their CPU when last sampled (`cpu_seconds`: take it before the browser closes)."""

    def __init__(self, excluded: int) -> None:
        self.excluded = excluded
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _family(self) -> set[int]:
        parents = _children()
        family, frontier = set(), {os.getpid()}
        while frontier:
            frontier = {pid for pid, parent in parents.items() if parent in frontier and pid != self.excluded}
            family |= frontier
        return family

    def cpu_seconds(self) -> float:
        return sum(_cpu_seconds(pid) for pid in self._family())

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, sum(_pss(pid) for pid in self._family()))

    def __enter__(self) -> BrowserMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def new_page_per_shot() -> type:
    """PageCapture opening a new page for every shot, as it did before its slots kept theirs."""
    from fleet.visual.capture import PageCapture

    class NewPagePerShot(PageCapture):
        async def _page(self, slot, viewport):  # noqa: ANN001, ANN202 - PageCapture's own signature
            held = self._pages.pop(slot, None)
            if held is not None:
                await held[1].close()
            return await super()._page(slot, viewport)

    return NewPagePerShot


async def run(capture_class: type, sites: int, sitemap_pages: int, viewports: list[str], concurrency: int,
              work: Path, emulator_pid: int, credentials: dict) -> dict:
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
            async with capture_class(work, concurrency=concurrency) as capture:
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
                browser_cpu = memory.cpu_seconds()
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
        "chromium_cpu_s": round(browser_cpu, 1), "chromium_cpu_s_per_shot": round(browser_cpu / (3 * checks), 2),
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
    from fleet.visual.capture import PageCapture

    rows = {}
    for name, capture_class in (("one page per slot", PageCapture), ("a new page per shot", new_page_per_shot())):
        with tempfile.TemporaryDirectory() as tmp:
            credentials_file = Path(tmp) / "credentials.json"
            emulator, _ = start_server(max(args.sites * 2, 50), credentials_file, extra=("--seed", "1"))
            try:
                credentials = json.loads(credentials_file.read_text())
                rows[name] = asyncio.run(run(capture_class, args.sites, args.sitemap_pages, args.viewports,
                                             args.concurrency, Path(tmp) / "run", emulator.pid, credentials))
            finally:
                stop_server(emulator)
    names = list(rows)
    width = max(len(key) for key in rows[names[0]])
    print(f"{'':<{width}}  " + "  ".join(f"{name:>20}" for name in names))
    for key in rows[names[0]]:
        print(f"{key:<{width}}  " + "  ".join(f"{rows[name][key]!s:>20}" for name in names))
    kept, fresh = rows[names[0]], rows[names[1]]
    ratio = round(fresh["chromium_cpu_s"] / max(kept["chromium_cpu_s"], 0.1), 2)
    print(f"Chromium CPU: {ratio}x less with one page per slot")
    verdict = "meets" if kept["checks_per_min"] >= TARGET_PER_MINUTE else "misses"
    print(f"{verdict} the target of {TARGET_PER_MINUTE} page checks per minute")
    out = ROOT / "bench" / "results" / "visual.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                               "cpus": os.cpu_count(), "target_checks_per_min": TARGET_PER_MINUTE,
                               "chromium_cpu_ratio": ratio, "rows": [{"capture": n, **r} for n, r in rows.items()]},
                              indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
