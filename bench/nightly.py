"""Nightly benchmark: the nightly flow over 1,000 and 10,000 sites against `fleet emulator serve` (its worker
model: one PHP worker per request, the sites of a call one after another, a 60 s gateway, a slow-site tail,
MainWP's limits on calls to child sites and sites sharing server IPs as agencies host them),
side by side with the same night done in other ways.

Variants: `pipeline` (calls sized by time), `pipeline-200` (the same flow forced to fixed 200-site calls, as
before calls were sized), `queued` (every call as one of the dashboard's batch jobs: its own pace, one cron
chunk of 20 sites per 30 s) and `sequential` (a plain script, one site after another).

For each variant: wall time against the emulator's modelled lower bound (total modelled work / its workers),
the gateway timeouts (504) its own calls met, the modelled seconds its calls to child sites waited on MainWP's
limits inside the dashboard, orchestration CPU per site (this process only: the emulator and
the Prefect server run elsewhere), peak RSS, requests the dashboard saw and job polls, and the dashboard work
the night asked for against the naive chain (sync all, update, check all, re-sync all).
Each variant runs in its own process against a fresh emulator; the
pipeline reports to one Prefect server started for the whole benchmark, as a deployed flow run reports to its
server (API only: its background services run on the operator's server, not beside the flow). The flow's
report step (from summary.json written to the flow's end: local work outside the dashboard's bound) is measured
inside the same run and shown apart; the peak RSS is the whole flow's, report step included. Each flow's log
goes to bench/results/.

The night measured is a dashboard's later night, whose earlier nights saw nothing fail (it reads no site's
rollback memory); `--first-night` measures a first one (it reads every site's).

Run: `python bench/nightly.py [--sites 1000 10000] [--time-scale 0.01] [--variants ...]
[--sequential-max-sites 1000] [--first-night]`.
Prints a table and writes bench/results/nightly.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
FLEET = str(Path(sys.executable).parent / "fleet")
WORKERS = 8
AN_ID = re.compile(r"/\d+")
VARIANTS = ("pipeline", "pipeline-200", "queued", "sequential")
# What each variant of the flow changes (FLEET_* settings); `scaled` values are multiplied by the time scale.
VARIANT_SETTINGS: dict[str, dict[str, str]] = {
    "pipeline": {},
    "pipeline-200": {"FLEET_CALL_BUDGET_SECONDS": "0", "FLEET_SITES_PER_CALL": "200"},
    # the pipeline believes in no threshold and the whole fleet is one chunk, so every step is one call per slug
    # filter for all the sites, which the dashboard queues as a batch job
    "queued": {"FLEET_CALL_BUDGET_SECONDS": "0", "FLEET_SITES_PER_CALL": "1000000",
               "FLEET_BATCH_THRESHOLD": "1000000", "FLEET_CHUNK_SIZE": "1000000"},
}


def start_emulator(sites: int, time_scale: float, credentials: Path, faults: str = "none") -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [FLEET, "emulator", "serve", "--port", "0", "--sites", str(sites), "--seed", "1", "--faults", faults,
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
        self.routes: Counter[str] = Counter()  # "POST /sites/{id}/sync": requests of each route, ids folded
        original = httpx.AsyncClient.send

        async def counted(client: httpx.AsyncClient, request: httpx.Request, *args: Any, **kwargs: Any) -> Any:
            if request.url.netloc == self.host:
                self.count += 1
                self.routes[f"{request.method} {AN_ID.sub('/{id}', request.url.path)}"] += 1
            return await original(client, request, *args, **kwargs)

        httpx.AsyncClient.send = counted  # type: ignore[method-assign]


def truth(credentials: dict[str, Any]) -> dict[str, Any]:
    root = credentials["base_url"].removesuffix("/wp-json")
    answer = httpx.get(f"{root}/__emulator__/state", params={"site_ids": "0"}, timeout=120,
                       headers={"x-emulator-token": credentials["admin_token"]})
    answer.raise_for_status()
    return answer.json()


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pipeline_env(credentials: dict[str, Any], report_dir: str, variant: str, time_scale: float) -> None:
    os.environ.update({
        "FLEET_BASE_URL": credentials["base_url"],
        "FLEET_NAMESPACE": credentials["namespace"],
        "FLEET_ABILITIES_URL": credentials["abilities_url"],
        "FLEET_API_KEY": credentials["api_keys"]["read_write"],
        "FLEET_ABILITIES_USER": credentials["application_password"]["username"],
        "FLEET_ABILITIES_PASSWORD": credentials["application_password"]["password"],
        "FLEET_REPORT_DIR": report_dir,
        "FLEET_HOME": report_dir,  # each variant's own memory, never the operator's
        "FLEET_PROBE_SITES": "false",  # the probe fetches the sites, not the dashboard: not part of the bound
        "FLEET_JOB_POLL_SECONDS": "0.2",
        "FLEET_TIME_SCALE": str(credentials.get("time_scale", time_scale)),  # budget, quiet wait, job deadline
        "FLEET_PROGRESS_SECONDS": str(max(30 * time_scale, 1.0)),  # a log cadence for people: wall seconds
        **VARIANT_SETTINGS[variant],
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


def later_night() -> None:
    """The state home of a dashboard whose earlier nights saw nothing fail: tonight reads no site's rollback memory
    (a dashboard's first night reads every site's: one `GET /updates/{id}` per site offered a plugin or theme)."""
    from dashboard.settings import DashboardSettings
    from fleet.model.settings import PipelineSettings
    from fleet.state.rollback_reads import RollbackReads
    from flows.sync import dashboard_memory

    settings = PipelineSettings()
    memory = dashboard_memory(None, settings)  # the dashboard's own memory, as the night opens it
    memory.open()
    RollbackReads(settings.with_memory(memory.path).state_path, DashboardSettings().base_url).record((), (), ())


def run_pipeline(credentials: dict[str, Any], sites: int, time_scale: float, variant: str,
                 first_night: bool = False) -> dict[str, Any]:
    from fleet.model.summary import Outcome, Summary
    from flows.nightly import nightly_maintenance

    pipeline_env(credentials, tempfile.mkdtemp(prefix="bench-nightly-"), variant, time_scale)
    if not first_night:
        later_night()
    requests = RequestCounter(credentials["base_url"])
    mark = SummaryMark()
    cpu, wall = cpu_seconds(), time.perf_counter()
    path = asyncio.run(nightly_maintenance(send_report=False))
    end_cpu, end_wall = cpu_seconds(), time.perf_counter()
    wall, cpu = end_wall - wall, end_cpu - cpu
    summary = Summary.read(Path(path))
    attempted = [item for item in summary.items if item.rule is None]
    capacity = truth(credentials).get("capacity", {})
    work = summary.work
    return {
        "variant": variant, "sites": sites, "wall_s": wall, "cpu_s": cpu,
        "report_wall_s": end_wall - mark.wall, "report_cpu_s": end_cpu - mark.cpu, "peak_rss_mb": peak_rss_mb(),
        "peak_rss_before_report_mb": mark.rss_mb,
        "lower_bound_s": float(capacity["lower_bound_wall_seconds"]),
        "gateway_timeouts": capacity.get("gateway_timeouts", 0), "child_waits_s": child_waits(capacity),
        "max_in_progress": capacity.get("max_in_progress"),
        "longest_queue_wait_s": capacity.get("longest_queue_wait_seconds"),
        "requests": requests.count, "routes": dict(requests.routes.most_common()),
        "polls": sum(job.polls for job in summary.jobs),
        "jobs": len(summary.jobs), "items": len(summary.items),
        "updated": summary.counts.by_outcome.get(Outcome.updated, 0),
        "unknown": summary.counts.by_outcome.get(Outcome.unknown, 0),
        "attempted": len(attempted),
        "work": work.model_dump() if work else None,
        "modelled_work": modelled_work(capacity),
    }


def child_waits(capacity: dict[str, Any]) -> float:
    """Modelled seconds the dashboard's calls to child sites waited on its own limits, all limits together."""
    return float(sum((capacity.get("child_connections") or {}).get("waited_seconds", {}).values()))


def modelled_work(capacity: dict[str, Any]) -> dict[str, float]:
    """The dashboard's own ledger: operations it worked and the modelled seconds of each kind."""
    seconds = capacity.get("work_seconds", {})
    operations = capacity.get("operations", {})
    return {operation: count * seconds.get(operation, 0.0) for operation, count in operations.items()}


async def sequential(credentials: dict[str, Any]) -> tuple[int, int, int, int]:
    """What a plain script does: one site after another, sync, list, update each type by slug, verify."""
    from dashboard.client import DashboardClient
    from dashboard.errors import DashboardError
    from fleet.rules.execution import APPLY_ORDER

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
            with contextlib.suppress(DashboardError):  # a slow site's verifying sync may meet the gateway too
                await client.sync_site(site.id)
                updated += len(pending) - len(await client.site_updates(site.id))
    return synced, items, updated, 0


def run_sequential(credentials: dict[str, Any], sites: int, time_scale: float) -> dict[str, Any]:
    requests = RequestCounter(credentials["base_url"])
    cpu, wall = cpu_seconds(), time.perf_counter()
    synced, items, updated, polls = asyncio.run(sequential(credentials))
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    capacity = truth(credentials).get("capacity", {})
    return {
        "variant": "sequential", "sites": sites, "wall_s": wall, "cpu_s": cpu,
        "report_wall_s": 0.0, "report_cpu_s": 0.0,
        "lower_bound_s": float(capacity["lower_bound_wall_seconds"]),
        "gateway_timeouts": capacity.get("gateway_timeouts", 0), "child_waits_s": child_waits(capacity),
        "max_in_progress": capacity.get("max_in_progress"),
        "requests": requests.count, "routes": dict(requests.routes.most_common()), "polls": polls, "jobs": 0,
        "items": items,
        "updated": updated, "modelled_work": modelled_work(capacity),
    }


def child(variant: str, credentials_file: Path, sites: int, time_scale: float, first_night: bool) -> None:
    credentials = json.loads(credentials_file.read_text())
    if variant == "sequential":
        result = run_sequential(credentials, sites, time_scale)
    else:
        result = run_pipeline(credentials, sites, time_scale, variant, first_night)
    result.setdefault("peak_rss_mb", peak_rss_mb())
    print("RESULT " + json.dumps(result), flush=True)


def measure(variant: str, sites: int, time_scale: float, prefect_env: dict[str, str], *, script: str = __file__,
            faults: str = "none", first_night: bool = False) -> dict[str, Any]:
    """One variant in a process of its own (`script --child`) against a fresh emulator; its log beside the
    results as `<script>-<variant>-<sites>.log`."""
    with tempfile.TemporaryDirectory() as scratch:
        credentials = Path(scratch) / "credentials.json"
        emulator = start_emulator(sites, time_scale, credentials, faults)
        try:
            out = subprocess.run(
                [sys.executable, script, "--child", variant, "--credentials", str(credentials),
                 "--sites", str(sites), "--time-scale", str(time_scale), *(["--first-night"] if first_night else [])],
                capture_output=True, text=True, cwd=ROOT, check=False, env={**os.environ, **prefect_env},
            )
        finally:
            stop_emulator(emulator)
    log = ROOT / "bench" / "results" / f"{Path(script).stem}-{variant}-{sites}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(out.stderr)  # the flow's own log: when each task run finished
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"{variant} over {sites} sites failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def table(results: list[dict[str, Any]]) -> str:
    """The flow's wall time and CPU without its report step (local rendering, shown apart), against the bound;
    `vs queued`: how many times faster than the queued-jobs variant at the same size; `work s / naive s`: the
    dashboard work the night asked for (modelled seconds at the times it measured) against the naive chain's."""
    header = (f"{'variant':<12} {'sites':>6} {'wall s':>8} {'bound s':>8} {'x bound':>7} {'504s':>5} {'waits s':>8} "
              f"{'vs queued':>9} {'cpu ms/site':>11} {'report s':>8} {'peak MB':>7} {'requests':>8} {'polls':>6} "
              f"{'items':>7} {'updated':>8} {'unknown':>7} {'work s / naive s':>17}")
    rows = [header, "-" * len(header)]
    queued = {r["sites"]: r["wall_s"] - r["report_wall_s"] for r in results if r["variant"] == "queued"}
    for r in results:
        wall = r["wall_s"] - r["report_wall_s"]
        ratio = wall / r["lower_bound_s"] if r["lower_bound_s"] else float("nan")
        faster = f"{queued[r['sites']] / wall:.1f}x" if r["sites"] in queued and r["variant"] != "queued" else "-"
        work = r.get("work") or {}
        versus = (f"{work['seconds']:.0f} / {work['naive_seconds']:.0f}"
                  if work.get("seconds") is not None and work.get("naive_seconds") is not None else "-")
        rows.append(f"{r['variant']:<12} {r['sites']:>6} {wall:>8.1f} {r['lower_bound_s']:>8.1f} {ratio:>7.2f} "
                    f"{r.get('gateway_timeouts', 0):>5} {r.get('child_waits_s', 0):>8.0f} {faster:>9} "
                    f"{1000 * (r['cpu_s'] - r['report_cpu_s']) / r['sites']:>11.2f} {r['report_wall_s']:>8.1f} "
                    f"{r['peak_rss_mb']:>7.0f} {r['requests']:>8} {r['polls']:>6} {r['items']:>7} {r['updated']:>8} "
                    f"{r.get('unknown', 0):>7} {versus:>17}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--sequential-max-sites", type=int, default=1000,
                        help="Run the sequential script only up to this fleet size (it is slow by design).")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "nightly.json")
    parser.add_argument("--first-night", action="store_true",
                        help="A dashboard's first night (it reads every site's rollback memory); default: a later one.")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--credentials", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.credentials, args.sites[0], args.time_scale, args.first_night)
        return
    results = []
    with tempfile.TemporaryDirectory() as home:
        server, prefect_env = start_prefect_server(Path(home))
        try:
            for sites in args.sites:
                for variant in args.variants:
                    if variant == "sequential" and sites > args.sequential_max_sites:
                        continue
                    results.append(measure(variant, sites, args.time_scale, prefect_env,
                                           first_night=args.first_night))
                    print(table(results[-1:]).splitlines()[-1], flush=True)
        finally:
            server.terminate()
            server.wait(timeout=60)
    print()
    print(table(results))
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"time_scale": args.time_scale, "python": platform.python_version(),
                               "machine": platform.machine(), "cpus": os.cpu_count(), "results": results}, indent=2))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
