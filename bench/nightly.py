"""Nightly benchmark: the nightly flow over 1,000 and 10,000 sites against `fleet emulator serve` (its latency and
capacity model), side by side with the same work done by a plain sequential script.

For each variant: wall time against the emulator's modelled lower bound (total modelled work / its workers),
orchestration CPU per site (this process only: the emulator and the Prefect server run elsewhere), peak RSS,
requests the dashboard saw and job polls. Each variant runs in its own process against a fresh emulator; the
pipeline reports to one Prefect server started for the whole benchmark, as a deployed flow run reports to its
server (API only: its background services run on the operator's server, not beside the flow). The flow's
report step (from summary.json written to the flow's end: local work outside the dashboard's bound) is measured
inside the same run and shown apart; the peak RSS is the whole flow's, report step included. Each flow's log
goes to bench/results/.

Run: `python bench/nightly.py [--sites 1000 10000] [--time-scale 0.01] [--sequential-max-sites 1000]`.
Prints a table and writes bench/results/nightly.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
FLEET = str(Path(sys.executable).parent / "fleet")
WORK_SECONDS = {"sync": 2.0, "check": 1.0, "update_item": 3.0}  # the emulator's defaults (emulator/capacity.py)
WORKERS = 8


def start_emulator(sites: int, time_scale: float, credentials: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [FLEET, "emulator", "serve", "--port", "0", "--sites", str(sites), "--seed", "1",
         "--time-scale", str(time_scale), "--workers", str(WORKERS), "--credentials-out", str(credentials)],
        stdout=subprocess.PIPE, text=True,
    )
    line = process.stdout.readline() if process.stdout else ""
    if not line.startswith("http://"):
        process.kill()
        raise RuntimeError(f"the emulator did not start with {sites} sites")
    return process


def start_prefect_server(home: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """One Prefect server for the whole benchmark; the flow processes report to it over HTTP."""
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_UI_ENABLED": "false"}
    process = subprocess.Popen([str(Path(sys.executable).parent / "prefect"), "server", "start", "--host",
                                "127.0.0.1", "--port", str(port), "--no-services"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    api = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return process, {"PREFECT_HOME": str(home), "PREFECT_API_URL": api}
        if process.poll() is not None:
            break
        time.sleep(0.5)
    process.kill()
    raise RuntimeError("the Prefect server did not start")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_emulator(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


class RequestCounter:
    """Counts the requests this process sends to the dashboard (the emulator counts only its REST routes)."""

    def __init__(self, base_url: str) -> None:
        self.host = httpx.URL(base_url).netloc
        self.count = 0
        original = httpx.AsyncClient.send

        async def counted(client: httpx.AsyncClient, request: httpx.Request, *args: Any, **kwargs: Any) -> Any:
            if request.url.netloc == self.host:
                self.count += 1
            return await original(client, request, *args, **kwargs)

        httpx.AsyncClient.send = counted  # type: ignore[method-assign]


def truth(credentials: dict[str, Any]) -> dict[str, Any]:
    root = credentials["base_url"].removesuffix("/wp-json")
    answer = httpx.get(f"{root}/__emulator__/state", params={"site_ids": "0"}, timeout=120,
                       headers={"x-emulator-token": credentials["admin_token"]})
    answer.raise_for_status()
    return answer.json()


def modelled_lower_bound(credentials: dict[str, Any], operations: dict[str, int], time_scale: float) -> float:
    """The emulator's own lower bound when it reports one, else total modelled work / workers."""
    capacity = truth(credentials).get("capacity")
    if capacity and "lower_bound_wall_seconds" in capacity:
        return float(capacity["lower_bound_wall_seconds"])
    work = sum(WORK_SECONDS[op] * count for op, count in operations.items())
    return work / WORKERS * time_scale


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pipeline_env(credentials: dict[str, Any], report_dir: str) -> None:
    os.environ.update({
        "FLEET_BASE_URL": credentials["base_url"],
        "FLEET_NAMESPACE": credentials["namespace"],
        "FLEET_ABILITIES_URL": credentials["abilities_url"],
        "FLEET_API_KEY": credentials["api_keys"]["read_write"],
        "FLEET_ABILITIES_USER": credentials["application_password"]["username"],
        "FLEET_ABILITIES_PASSWORD": credentials["application_password"]["password"],
        "FLEET_REPORT_DIR": report_dir,
        "FLEET_PROBE_SITES": "false",  # the probe fetches the sites, not the dashboard: not part of the bound
        "FLEET_JOB_POLL_SECONDS": "0.2",
    })


class SummaryMark:
    """The moment the flow has written summary.json: its pipeline ends there and its report step begins (the
    report's imports, rendering and artifact, measured up to the flow's end)."""

    def __init__(self) -> None:
        import flows.update

        self.cpu = self.wall = 0.0
        self.rss_mb = 0.0
        write = flows.update.write_summary_task

        async def marked(*args: Any, **kwargs: Any) -> Any:
            path = await write(*args, **kwargs)
            self.cpu, self.wall, self.rss_mb = cpu_seconds(), time.perf_counter(), peak_rss_mb()
            return path

        flows.update.write_summary_task = marked


def run_pipeline(credentials: dict[str, Any], sites: int, time_scale: float) -> dict[str, Any]:
    from fleet.summary import Outcome, Summary
    from flows.nightly import nightly_maintenance

    pipeline_env(credentials, tempfile.mkdtemp(prefix="bench-nightly-"))
    requests = RequestCounter(credentials["base_url"])
    mark = SummaryMark()
    cpu, wall = cpu_seconds(), time.perf_counter()
    path = asyncio.run(nightly_maintenance(send_report=False))
    end_cpu, end_wall = cpu_seconds(), time.perf_counter()
    wall, cpu = end_wall - wall, end_cpu - cpu
    summary = Summary.read(Path(path))
    attempted = [item for item in summary.items if item.rule is None]
    worked_on = {item.site_id for item in attempted}
    synced = sum(1 for site in summary.sites if site.status == "online")
    operations = {"sync": synced + len(worked_on), "check": len(worked_on), "update_item": len(attempted)}
    return {
        "variant": "pipeline", "sites": sites, "wall_s": wall, "cpu_s": cpu,
        "report_wall_s": end_wall - mark.wall, "report_cpu_s": end_cpu - mark.cpu, "peak_rss_mb": peak_rss_mb(),
        "peak_rss_before_report_mb": mark.rss_mb,
        "lower_bound_s": modelled_lower_bound(credentials, operations, time_scale),
        "requests": requests.count, "polls": sum(job.polls for job in summary.jobs),
        "jobs": len(summary.jobs), "items": len(summary.items),
        "updated": summary.counts.by_outcome.get(Outcome.updated, 0),
    }


async def sequential(credentials: dict[str, Any]) -> tuple[int, int, int, int]:
    """What a plain script does: one site after another, sync, list, update each type by slug, verify."""
    from dashboard.client import DashboardClient
    from dashboard.errors import DashboardError
    from fleet.execution import APPLY_ORDER

    synced = updated = items = 0
    async with DashboardClient.from_credentials(credentials) as client:
        ignored = {(entry.site_id, entry.type, entry.slug) for entry in await client.list_ignored_updates()}
        for site in await client.list_sites():
            try:
                await client.sync_site(site.id)
                pending = [u for u in await client.site_updates(site.id) if (u.site_id, u.type, u.slug) not in ignored]
            except DashboardError:
                continue
            synced += 1
            items += len(pending)
            for type_ in APPLY_ORDER:
                slugs = [u.slug for u in pending if u.type is type_]
                if slugs:
                    with contextlib.suppress(DashboardError):
                        await client.update_site_items(site.id, type_, slugs)
            await client.sync_site(site.id)
            updated += len(pending) - len(await client.site_updates(site.id))
    return synced, items, updated, 0


def run_sequential(credentials: dict[str, Any], sites: int, time_scale: float) -> dict[str, Any]:
    requests = RequestCounter(credentials["base_url"])
    cpu, wall = cpu_seconds(), time.perf_counter()
    synced, items, updated, polls = asyncio.run(sequential(credentials))
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    operations = {"sync": 2 * synced, "check": 0, "update_item": items}
    return {
        "variant": "sequential", "sites": sites, "wall_s": wall, "cpu_s": cpu,
        "report_wall_s": 0.0, "report_cpu_s": 0.0,
        "lower_bound_s": modelled_lower_bound(credentials, operations, time_scale),
        "requests": requests.count, "polls": polls, "jobs": 0, "items": items,
        "updated": updated,
    }


def child(variant: str, credentials_file: Path, sites: int, time_scale: float) -> None:
    credentials = json.loads(credentials_file.read_text())
    result = (run_pipeline if variant == "pipeline" else run_sequential)(credentials, sites, time_scale)
    result.setdefault("peak_rss_mb", peak_rss_mb())
    print("RESULT " + json.dumps(result), flush=True)


def measure(variant: str, sites: int, time_scale: float, prefect_env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        credentials = Path(scratch) / "credentials.json"
        emulator = start_emulator(sites, time_scale, credentials)
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant, "--credentials", str(credentials),
                 "--sites", str(sites), "--time-scale", str(time_scale)],
                capture_output=True, text=True, cwd=ROOT, check=False, env={**os.environ, **prefect_env},
            )
        finally:
            stop_emulator(emulator)
    log = ROOT / "bench" / "results" / f"nightly-{variant}-{sites}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(out.stderr)  # the flow's own log: when each task run finished
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"{variant} over {sites} sites failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def table(results: list[dict[str, Any]]) -> str:
    """The flow's wall time and CPU without its report step (local rendering, shown apart), against the bound."""
    header = (f"{'variant':<11} {'sites':>6} {'wall s':>8} {'bound s':>8} {'x bound':>8} {'cpu ms/site':>11} "
              f"{'report s':>9} {'report ms/site':>14} {'peak MB':>8} {'requests':>9} {'polls':>6} "
              f"{'items':>7} {'updated':>8}")
    rows = [header, "-" * len(header)]
    for r in results:
        wall = r["wall_s"] - r["report_wall_s"]
        ratio = wall / r["lower_bound_s"] if r["lower_bound_s"] else float("nan")
        rows.append(f"{r['variant']:<11} {r['sites']:>6} {wall:>8.1f} {r['lower_bound_s']:>8.1f} {ratio:>8.2f} "
                    f"{1000 * (r['cpu_s'] - r['report_cpu_s']) / r['sites']:>11.2f} {r['report_wall_s']:>9.1f} "
                    f"{1000 * r['report_cpu_s'] / r['sites']:>14.2f} {r['peak_rss_mb']:>8.0f} "
                    f"{r['requests']:>9} {r['polls']:>6} {r['items']:>7} {r['updated']:>8}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--sequential-max-sites", type=int, default=1000,
                        help="Run the sequential script only up to this fleet size (it is slow by design).")
    parser.add_argument("--child", choices=["pipeline", "sequential"], help=argparse.SUPPRESS)
    parser.add_argument("--credentials", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.credentials, args.sites[0], args.time_scale)
        return
    results = []
    with tempfile.TemporaryDirectory() as home:
        server, prefect_env = start_prefect_server(Path(home))
        try:
            for sites in args.sites:
                for variant in ("pipeline", *(("sequential",) if sites <= args.sequential_max_sites else ())):
                    results.append(measure(variant, sites, args.time_scale, prefect_env))
                    print(table(results[-1:]).splitlines()[-1], flush=True)
        finally:
            server.terminate()
            server.wait(timeout=60)
    print()
    print(table(results))
    out = ROOT / "bench" / "results" / "nightly.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"time_scale": args.time_scale, "python": platform.python_version(),
                               "machine": platform.machine(), "cpus": os.cpu_count(), "results": results}, indent=2))
    print(f"\nwritten to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
