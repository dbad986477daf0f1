"""Visual checks measured inside a night: the same fleet's night with and without the policy's `visual: {}` on the
dashboard's real clock (time scale 1), and the page checks a minute in this process and on 1 and 2 local Prefect
task workers (`fleet screenshots serve`).

Nights: `fleet emulator serve` (faults `none`, one plugin release in ten marked to take a site's stylesheet away
while it answers 200) and the nightly flow in a process of its own per variant, against one Prefect server started
for the benchmark; both variants probe the sites' home pages (the visual checks need the probe before). Missed
breaks are marked sites whose look is not broken; false alarms are unmarked sites whose look is not healthy.

Throughput: the night's watch (`fleet.engine.visual_watch`) over N healthy sites of a fresh emulator with the
default pages (the home page and 4 sitemap pages at 2 viewports: 10 page checks a site), one site in five broken
visually after the baselines. A page check is one page at one viewport judged after an update. `first night`: its
baselines shot (twice, the gap between); `later night`: the baselines carried from the first (no shot before the
update), as every night after a healthy one. The same work is done by Chromium in the benchmark's own process
(`in process`) and by 1 and 2 task workers, each with its own Chromium.

Run: `python bench/visual_night.py [--night-sites 50] [--sites 6] [--skip-nights] [--skip-throughput]`.
Prints a table and writes bench/results/visual_night.json. Targets: the night with `visual: {}` at most 1.25x the
night without at 50 sites; page checks a minute at least 3x the 35.4 measured before on this 2-core machine per
core (53 a core); 2 workers at least 1.7x one; no missed break, no false alarm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the script's own directory would shadow the `emulator` package

from bench.nightly import (  # noqa: E402
    cpu_seconds,
    pipeline_env,
    start_emulator,
    start_prefect_server,
    stop_emulator,
)

FLEET = str(Path(sys.executable).parent / "fleet")
BEFORE_PER_CORE = 35.4 / 2  # page checks a minute a core, bench/visual.py before this work (README)
TARGETS = {"night_ratio": 1.25, "per_core_x": 3.0, "two_workers_x": 1.7}
MARK_EVERY = 10  # one plugin release in ten, of the sites offered one, breaks its site visually


def fleet_truth(credentials: dict[str, Any]) -> dict[str, Any]:
    """Every site of the emulator's ground truth, in full."""
    root = credentials["base_url"].removesuffix("/wp-json")
    answer = httpx.get(f"{root}/__emulator__/state", timeout=120,
                       headers={"X-Emulator-Token": credentials["admin_token"]})
    answer.raise_for_status()
    return answer.json()["sites"]


def mark_breaks(credentials: dict[str, Any], every: int) -> list[int]:
    """Mark one offered plugin release on every `every`-th site offered one; returns the marked sites."""
    sites = fleet_truth(credentials)
    admin = {"X-Emulator-Token": credentials["admin_token"]}
    root = credentials["base_url"].removesuffix("/wp-json")
    marked = []
    candidates = [site for site in sites.values() if site["reachable"] and site["status"] == "connected"
                  and any(u["type"] == "plugin" for u in site["pending_updates"])]
    for site in sorted(candidates, key=lambda s: s["id"])[::every]:
        slug = next((u["slug"] for u in site["pending_updates"] if u["type"] == "plugin"
                     and site["plugins"].get(u["slug"], {}).get("active")), None)
        if slug is None:
            continue
        answer = httpx.post(f"{root}/__emulator__/faults/visual", headers=admin, timeout=30,
                            json={"site_id": site["id"], "type": "plugin", "slug": slug, "mode": "css"})
        if answer.status_code == 200:
            marked.append(site["id"])
    return marked


def run_night(credentials: dict[str, Any], variant: str, marked: list[int], work: Path) -> dict[str, Any]:
    """One night in this (child) process: the nightly flow with or without `visual: {}`."""
    from cli.demo import dashboard_environment
    from fleet.model.summary import Band, Summary
    from flows.nightly import nightly_maintenance

    pipeline_env(credentials, str(work / "reports"), "pipeline", 1.0)
    os.environ.update(dashboard_environment(credentials))
    os.environ["FLEET_PROBE_SITES"] = "true"  # the visual checks shoot the sites that passed the probe before
    policy = work / "policy.yaml"
    policy.write_text("visual: {}\n" if variant == "visual" else "{}\n")
    async def one_night() -> Any:
        state = await nightly_maintenance(policy_file=str(policy), send_report=False, return_state=True)
        return await state.result(raise_on_failure=False)  # a night that broke a site ends Failed, summary written

    cpu, wall = cpu_seconds(), time.perf_counter()
    result = asyncio.run(one_night())
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    path = result if isinstance(result, str) else result.summary_path
    summary = Summary.read(Path(path))
    looks = {look.site_id: look.band for look in summary.looks}
    broken = {alarm.site_id for alarm in summary.broken}
    return {
        "variant": variant, "sites": len(summary.sites), "wall_s": wall, "cpu_s": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "watched": len(looks), "page_checks": sum(len(look.pages) for look in summary.looks),
        "marked": len(marked), "broken": len(broken),
        "missed": len([site for site in marked if looks.get(site) is not Band.broken]) if variant == "visual" else None,
        "false_alarms": len([site for site, band in looks.items() if site not in marked and band is not Band.healthy]),
        "updated": summary.counts.by_outcome.get("updated", 0),
    }


def night(variant: str, sites: int, prefect_env: dict[str, str]) -> dict[str, Any]:
    """A night in a process of its own against a fresh emulator at time scale 1 (same seed: the same fleet)."""
    with tempfile.TemporaryDirectory() as scratch:
        credentials = Path(scratch) / "credentials.json"
        emulator = start_emulator(sites, 1.0, credentials)
        try:
            marked = mark_breaks(json.loads(credentials.read_text()), MARK_EVERY)
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant, "--credentials", str(credentials),
                 "--marked", json.dumps(marked), "--work", scratch],
                capture_output=True, text=True, cwd=ROOT, check=False, env={**os.environ, **prefect_env})
        finally:
            stop_emulator(emulator)
    log = ROOT / "bench" / "results" / f"visual_night-{variant}-{sites}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(out.stderr)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"the {variant} night failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


async def watch_throughput(credentials: dict[str, Any], sites: int, workers: int, work: Path) -> dict[str, Any]:
    """Page checks a minute of the night's watch: a first night (baselines shot), then a later one (carried)."""
    from fleet.engine.visual_watch import VisualWatch
    from fleet.model.settings import PipelineSettings
    from fleet.model.summary import Band, UpdateType
    from fleet.rules.plan import SiteRecord
    from fleet.rules.policy import Policy
    from fleet.state.visual_baselines import VisualBaselines
    from tasks.page_checks import worker_capture

    settings = PipelineSettings(probe_url_template=credentials["site_url_template"], report_dir=work,
                                visual_task_workers=workers > 0, visual_worker_timeout_seconds=1800)
    policy = Policy.model_validate({"visual": {}})
    state = fleet_truth(credentials)
    healthy = sorted((s for s in state.values() if s["reachable"] and s["front_end"]["status"] == "up"),
                     key=lambda s: s["id"])[:sites]
    records = [SiteRecord(id=s["id"], url=s["url"], name=s["url"]) for s in healthy]
    broken = [record.id for record in records[::5]]
    kept = VisualBaselines(work / "state", "bench")
    admin = {"X-Emulator-Token": credentials["admin_token"]}
    root = credentials["base_url"].removesuffix("/wp-json")
    rows = {}
    async with httpx.AsyncClient(timeout=60) as http:
        for night_name in ("first night", "later night"):
            run_dir = work / night_name.replace(" ", "-") / str(workers)
            watch = VisualWatch.for_night(policy.visual, run_dir, settings,
                                          capture=worker_capture(policy, run_dir, settings))
            assert watch is not None
            watch.remember_in(kept, [])
            async with watch:
                started = time.perf_counter()
                await watch.take_baselines(records, http)
                if night_name == "later night":  # the break is on tonight's release only
                    for site_id in broken:
                        await http.post(f"{root}/__emulator__/faults/visual", headers=admin,
                                        json={"site_id": site_id, "mode": "css"})
                looks = await watch.look_after(records, UpdateType.plugin)
                wall = time.perf_counter() - started
                watch.lane_settled([record.id for record in records], [])
                for site_id in broken:  # lifted again: the next measure starts from healthy pages
                    await http.post(f"{root}/__emulator__/faults/visual", headers=admin,
                                    json={"site_id": site_id, "mode": None})
                watch.finish(set(broken) if night_name == "later night" else set())
            checks = sum(len(look.pages) for look in looks.values())
            expect_broken = set(broken) if night_name == "later night" else set()
            rows[night_name] = {
                "workers": workers, "night": night_name, "sites": len(records), "page_checks": checks,
                "shots": watch.shots_taken, "wall_s": round(wall, 1),
                "checks_per_min": round(checks / wall * 60, 1) if wall else None,
                "missed": len([s for s in expect_broken if looks.get(s) is None or looks[s].band is not Band.broken]),
                "false_alarms": len([s for s, look in looks.items() if s not in expect_broken
                                     and look.band is not Band.healthy]),
                "off": watch.off,
            }
    return rows


def throughput(sites: int, workers: int, prefect_env: dict[str, str]) -> list[dict[str, Any]]:
    """The watch's throughput with `workers` task workers (0: Chromium in this process), against a fresh emulator."""
    with tempfile.TemporaryDirectory() as scratch:
        credentials_file = Path(scratch) / "credentials.json"
        emulator = start_emulator(max(sites * 2, 40), 1.0, credentials_file)
        env = {**os.environ, **prefect_env, "PREFECT_LOCAL_STORAGE_PATH": str(Path(scratch) / "storage")}
        started = [subprocess.Popen([FLEET, "screenshots", "serve", "--runs", "2"], env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--child", "throughput", "--credentials", str(credentials_file),
                 "--sites", str(sites), "--workers", str(workers), "--work", scratch],
                capture_output=True, text=True, cwd=ROOT, check=False, env=env)
        finally:
            for worker in started:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=60)
            stop_emulator(emulator)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"the throughput with {workers} worker(s) failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def tables(nights: list[dict[str, Any]], rates: list[dict[str, Any]]) -> str:
    lines = []
    if nights:
        lines += ["variant       sites  wall s  cpu s  watched  page checks  marked  broken  missed  false alarms",
                  "-" * 94]
        for r in nights:
            lines.append(f"{r['variant']:<12} {r['sites']:>6} {r['wall_s']:>7.1f} {r['cpu_s']:>6.1f} {r['watched']:>8} "
                         f"{r['page_checks']:>12} {r['marked']:>7} {r['broken']:>7} {str(r['missed']):>7} "
                         f"{r['false_alarms']:>13}")
        by = {r["variant"]: r for r in nights}
        if {"visual", "plain"} <= by.keys():
            lines.append(f"night with visual: {{}} / without: {by['visual']['wall_s'] / by['plain']['wall_s']:.2f}x "
                         f"(target {TARGETS['night_ratio']}x)")
        lines.append("")
    if rates:
        lines += ["shooting       night         sites  page checks  shots  wall s  checks/min  per core  missed  false",
                  "-" * 98]
        cores = os.cpu_count() or 1
        for r in rates:
            who = "in process" if r["workers"] == 0 else f"{r['workers']} worker(s)"
            lines.append(f"{who:<14} {r['night']:<12} {r['sites']:>6} {r['page_checks']:>12} {r['shots']:>6} "
                         f"{r['wall_s']:>7.1f} {r['checks_per_min']:>11} {r['checks_per_min'] / cores:>9.1f} "
                         f"{r['missed']:>7} {r['false_alarms']:>6}")
        later = {r["workers"]: r["checks_per_min"] for r in rates if r["night"] == "later night"}
        if 1 in later and 2 in later:
            lines.append(f"2 workers / 1 worker (later night): {later[2] / later[1]:.2f}x "
                         f"(target {TARGETS['two_workers_x']}x)")
        best = max(later.values(), default=0)
        per_core = best / cores
        lines.append(f"best later-night checks a minute a core: {per_core:.1f}, {per_core / BEFORE_PER_CORE:.1f}x "
                     f"the {BEFORE_PER_CORE:.1f} before (target {TARGETS['per_core_x']}x)")
    return "\n".join(lines)


def child(args: argparse.Namespace) -> None:
    credentials = json.loads(args.credentials.read_text())
    if args.child == "throughput":
        rows = asyncio.run(watch_throughput(credentials, args.sites, args.workers[0], Path(args.work)))
        print("RESULT " + json.dumps(list(rows.values())), flush=True)
        return
    print("RESULT " + json.dumps(run_night(credentials, args.child, json.loads(args.marked), Path(args.work))),
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--night-sites", type=int, default=50)
    parser.add_argument("--sites", type=int, default=6, help="sites of the throughput measure (10 checks each)")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--skip-nights", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--credentials", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--marked", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    load = os.getloadavg()
    nights: list[dict[str, Any]] = []
    rates: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as home:
        server, prefect_env = start_prefect_server(Path(home))
        try:
            if not args.skip_nights:
                for variant in ("plain", "visual"):
                    nights.append(night(variant, args.night_sites, prefect_env))
                    print(tables(nights[-1:], []).splitlines()[2], flush=True)
            if not args.skip_throughput:
                for workers in args.workers:
                    rates += throughput(args.sites, workers, prefect_env)
                    print(tables([], rates[-2:]), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=60)
    print()
    print(tables(nights, rates))
    out = ROOT / "bench" / "results" / "visual_night.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                               "cpus": os.cpu_count(), "load_before": load, "load_after": os.getloadavg(),
                               "targets": TARGETS, "before_per_core": BEFORE_PER_CORE,
                               "nights": nights, "throughput": rates}, indent=2) + "\n")
    print(f"\nload average before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}; wrote {out}")


if __name__ == "__main__":
    main()
