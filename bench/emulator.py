"""Emulator benchmark: start-up time at 50 / 1,000 / 10,000 sites, requests per second on `/sites`,
`/updates` and a per-site update route, a full paged `list-updates-v1` listing at 10,000 sites, a queued
sync job's wall time next to the capacity model's lower bound (from the ground truth), and the capacity model
(PHP workers, sites one after another, the gateway) next to what a real dashboard does, each against a real
`fleet emulator serve` process.

Prints a table and writes bench/results/emulator.json. Run: `python bench/emulator.py [--seconds 3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
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


def start_server(sites: int, credentials: Path, time_scale: float = 0.000001,
                 extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen[str], float]:
    started = time.perf_counter()
    process = subprocess.Popen(
        [
            FLEET, "emulator", "serve", "--port", "0", "--sites", str(sites), "--credentials-out", str(credentials),
            "--time-scale", str(time_scale), *extra,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline() if process.stdout else ""
    if not line.startswith("http://"):
        process.kill()
        raise RuntimeError(f"the emulator did not start with {sites} sites")
    return process, time.perf_counter() - started


def stop_server(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)


async def rate(
    client: httpx.AsyncClient, requests: list[tuple[str, str, dict[str, Any]]], seconds: float, concurrency: int
) -> tuple[float, int, float, int]:
    """(requests per second, requests done, mean latency ms, error answers) cycling through `requests`."""
    done = errors = 0
    latency = 0.0
    deadline = time.perf_counter() + seconds
    cursor = iter(range(10**9))

    async def worker() -> None:
        nonlocal done, errors, latency
        while time.perf_counter() < deadline:
            method, path, kwargs = requests[next(cursor) % len(requests)]
            t0 = time.perf_counter()
            response = await client.request(method, path, **kwargs)
            latency += time.perf_counter() - t0
            done += 1
            errors += response.status_code >= 400

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    return done / elapsed, done, 1000 * latency / max(done, 1), errors


async def throughput(sites: int, seconds: float, concurrency: int, results: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        credentials_path = Path(tmp) / "credentials.json"
        process, _ = start_server(sites, credentials_path)
        try:
            creds = json.loads(credentials_path.read_text())
            headers = {"Authorization": "Bearer " + creds["api_keys"]["read_write"]}
            ns = creds["namespace"]
            async with httpx.AsyncClient(base_url=creds["base_url"], headers=headers, timeout=120) as client:
                updates = (await client.get(f"/{ns}/v2/updates", params={"type": "plugins"})).json()["data"]
                per_site = [
                    ("POST", f"/{ns}/v2/updates/{u['site_id']}/update/plugins", {"data": {"slug": u["slug"]}})
                    for u in updates
                ]
                cases = [
                    ("GET /sites (page of 20)", [("GET", f"/{ns}/v2/sites", {})]),
                    ("GET /sites/count", [("GET", f"/{ns}/v2/sites/count", {})]),
                    ("GET /updates (whole fleet)", [("GET", f"/{ns}/v2/updates", {})]),
                    (
                        "GET /updates?include=<site>",
                        [
                            ("GET", f"/{ns}/v2/updates", {"params": {"include": i}})
                            for i in range(1, min(sites, 500) + 1)
                        ],
                    ),
                    ("POST /updates/{id}/update/plugins", per_site),
                ]
                for label, requests in cases:
                    workers = 1 if "whole fleet" in label else concurrency
                    rps, done, mean_ms, errors = await rate(client, requests, seconds, workers)
                    results.append(
                        {
                            "sites": sites,
                            "route": label,
                            "concurrency": workers,
                            "requests": done,
                            "requests_per_second": round(rps, 1),
                            "error_answers": errors,
                            "mean_latency_ms": round(mean_ms, 2),
                        }
                    )
        finally:
            stop_server(process)


async def paged_listing(sites: int, results: list[dict[str, Any]]) -> None:
    """Page through `list-updates-v1` (200 per page, the maximum) over the whole fleet, as the client does."""
    with tempfile.TemporaryDirectory() as tmp:
        credentials_path = Path(tmp) / "credentials.json"
        process, _ = start_server(sites, credentials_path)
        try:
            creds = json.loads(credentials_path.read_text())
            app = creds["application_password"]
            url = f"{creds['abilities_url']}/abilities/{creds['namespace']}/list-updates-v1/run"
            async with httpx.AsyncClient(auth=(app["username"], app["password"]), timeout=300) as client:
                started = time.perf_counter()
                page = listed = total = pages = 0
                while page == 0 or listed < total:
                    page += 1
                    answer = await client.get(url, params={"input": json.dumps({"page": page, "per_page": 200})})
                    answer.raise_for_status()
                    body = answer.json()
                    total, listed, pages = body["total"], listed + len(body["updates"]), pages + 1
                    if not body["updates"]:
                        break
                wall = time.perf_counter() - started
        finally:
            stop_server(process)
    results.append({"sites": sites, "pages": pages, "updates": listed, "wall_seconds": round(wall, 2),
                    "mean_page_ms": round(1000 * wall / max(pages, 1), 1)})


async def job_against_capacity(sites: int, time_scale: float, results: list[dict[str, Any]]) -> None:
    """Queue a sync of the whole fleet through REST v2 and time it to completion; the ground truth gives the
    modelled work and its lower bound (work / workers, scaled), the cron schedule gives the delay floor."""
    with tempfile.TemporaryDirectory() as tmp:
        credentials_path = Path(tmp) / "credentials.json"
        process, _ = start_server(sites, credentials_path, time_scale)
        try:
            creds = json.loads(credentials_path.read_text())
            root = creds["base_url"].removesuffix("/wp-json")
            headers = {"Authorization": "Bearer " + creds["api_keys"]["read_write"]}
            admin = {"X-Emulator-Token": creds["admin_token"]}
            async with httpx.AsyncClient(base_url=creds["base_url"], headers=headers, timeout=120) as client:
                started = time.perf_counter()
                queued = (await client.post(f"/{creds['namespace']}/v2/sites/sync")).json()
                if "job_id" not in queued:
                    raise RuntimeError(f"the sync of {sites} sites was not queued: {queued}")
                while True:
                    truth = (await client.get(f"{root}/__emulator__/state", params={"site_ids": "0"},
                                              headers=admin)).json()
                    if all(job["status"] in ("completed", "failed") for job in truth["batch_jobs"]):
                        break
                    await asyncio.sleep(0.01)
                wall = time.perf_counter() - started
        finally:
            stop_server(process)
    capacity = truth["capacity"]
    chunks = -(-sites // 20)
    results.append({
        "sites": sites,
        "time_scale": time_scale,
        "workers": capacity["workers"],
        "modelled_work_seconds": capacity["modelled_seconds"],
        "lower_bound_wall_seconds": capacity["lower_bound_wall_seconds"],
        # the first run 60 s after queueing, then each chunk's own work (on ONE worker) and 30 s to the next
        "cron_delay_wall_seconds": round((60 + (chunks - 1) * 30) * time_scale + capacity["modelled_seconds"]
                                         * time_scale, 3),
        "wall_seconds": round(wall, 3),
        "job_status": truth["batch_jobs"][0]["status"],
    })


# What a real MainWP Dashboard does: measured on a dashboard 6.1.2 with two child sites on one server, from the
# public source (the abilities' per-site foreach, `MainWP_Connect::check_constraints`) and nginx's defaults.
REAL_DASHBOARD = {
    "one site": "1.0 s (measured, local child: 0.23 s work, the rest the per-IP delay)",
    "two sites": "2.0 s (measured): the sites one after another",
    "one server": "the second waits for the first (one request per IP), then its 1 s per-IP delay",
    "8 parallel": "at most 4 child requests open at once: two rounds",
    "16 parallel": "four rounds of 4 (8 PHP workers, 4 child requests)",
    "200 sites": "~400 s on one worker (2 s a site)",
    "gateway": "nginx 504 at 60 s; PHP carries on",
}


async def model_against_the_real_dashboard(time_scale: float, results: list[dict[str, Any]]) -> None:
    """Time the capacity model's cases over a real socket (default workers, bootstrap and gateway; the slow tail
    off so every site costs the nominal 2 s) and give each in modelled seconds (wall / time scale)."""
    with tempfile.TemporaryDirectory() as tmp:
        credentials_path = Path(tmp) / "credentials.json"
        process, _ = start_server(400, credentials_path, time_scale, ("--slow-site-rate", "0"))
        try:
            creds = json.loads(credentials_path.read_text())
            app = creds["application_password"]
            url = f"{creds['abilities_url']}/abilities/{creds['namespace']}/sync-sites-v1/run"
            admin = {"X-Emulator-Token": creds["admin_token"]}
            truth_url = creds["dashboard_url"] + "/__emulator__/state"
            async with httpx.AsyncClient(auth=(app["username"], app["password"]), timeout=600) as client:
                sites = (await client.get(truth_url, headers=admin)).json()["sites"].values()
                usable = [s for s in sites if s["reachable"] and s["child_connected"] and not s["suspended"]
                          and s["offline_check_result"] != -1 and int(s["child_version"].split(".")[0]) >= 4]
                servers: dict[str, list[int]] = {}
                for site in usable:
                    servers.setdefault(site["ip"], []).append(site["id"])
                shared = next(ids for ids in servers.values() if len(ids) >= 4)  # sites of one server
                alone = [ids[0] for ids in servers.values() if ids is not shared]  # one site on each other server

                async def sync(ids: list[int]) -> tuple[float, int]:
                    started = time.perf_counter()
                    answer = await client.post(url, json={"input": {"site_ids_or_domains": ids}})
                    return (time.perf_counter() - started) / time_scale, answer.status_code

                async def ledger() -> dict[str, Any]:
                    return (await client.get(truth_url, params={"site_ids": "0"}, headers=admin)).json()["capacity"]

                for label, ids in (("one site", alone[:1]), ("two sites", shared[:2])):
                    seconds, status = await sync(ids)
                    results.append({"case": label + (" of one server in one call" if len(ids) > 1 else ""),
                                    "real": REAL_DASHBOARD[label], "status": status,
                                    "answered_s": round(seconds, 2), "work_landed_s": round(seconds, 2)})
                    await asyncio.sleep(1.0 * time_scale)  # past the per-IP delay before the next case
                for label, calls in (("one server", [[i] for i in shared[2:4]]),
                                     ("8 parallel", [[i] for i in alone[1:9]]),
                                     ("16 parallel", [[i] for i in alone[9:25]])):
                    started = time.perf_counter()
                    answers = await asyncio.gather(*(sync(ids) for ids in calls))
                    seconds = (time.perf_counter() - started) / time_scale
                    case = ("2 parallel one-site calls, one server" if label == "one server"
                            else f"{len(calls)} parallel one-site calls, {len(calls)} servers")
                    results.append({"case": case, "real": REAL_DASHBOARD[label],
                                    "status": max(status for _, status in answers), "answered_s": round(seconds, 2),
                                    "work_landed_s": round(seconds, 2)})
                before = await ledger()
                started = time.perf_counter()
                seconds, status = await sync([site["id"] for site in usable[:200]])
                while (after := await ledger())["in_progress"]:
                    await asyncio.sleep(0.01)
                landed = (time.perf_counter() - started) / time_scale
                results.append({"case": "200 sites in one call (past the gateway)",
                                "real": f"{REAL_DASHBOARD['200 sites']}; {REAL_DASHBOARD['gateway']}",
                                "status": status, "answered_s": round(seconds, 2), "work_landed_s": round(landed, 2),
                                "gateway_timeouts": after["gateway_timeouts"] - before["gateway_timeouts"],
                                "modelled_work_s": round(after["modelled_seconds"] - before["modelled_seconds"], 2)})
        finally:
            stop_server(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each throughput run")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    startup: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for sites in (50, 1_000, 10_000):
            process, seconds = start_server(sites, Path(tmp) / f"c{sites}.json")
            stop_server(process)
            startup.append({"sites": sites, "ready_seconds": round(seconds, 2)})
    throughput_rows: list[dict[str, Any]] = []
    for sites in (1_000, 10_000):
        asyncio.run(throughput(sites, args.seconds, args.concurrency, throughput_rows))
    listing_rows: list[dict[str, Any]] = []
    asyncio.run(paged_listing(10_000, listing_rows))
    job_rows: list[dict[str, Any]] = []
    asyncio.run(job_against_capacity(1_000, 0.001, job_rows))
    model_rows: list[dict[str, Any]] = []
    asyncio.run(model_against_the_real_dashboard(0.05, model_rows))

    print("\nStart-up (process start to base URL printed)")
    print(f"{'sites':>8} | {'ready (s)':>9}")
    for row in startup:
        print(f"{row['sites']:>8} | {row['ready_seconds']:>9}")
    print("\nThroughput (real socket, one emulator process, httpx client)")
    print(f"{'sites':>6} | {'route':<34} | {'conc':>4} | {'req/s':>8} | {'mean ms':>8} | {'errors':>6}")
    for row in throughput_rows:
        print(
            f"{row['sites']:>6} | {row['route']:<34} | {row['concurrency']:>4} | "
            f"{row['requests_per_second']:>8} | {row['mean_latency_ms']:>8} | {row['error_answers']:>6}"
        )
    print("\nA full paged list-updates-v1 listing (200 per page, real socket)")
    print(f"{'sites':>6} | {'pages':>5} | {'updates':>7} | {'wall (s)':>8} | {'ms/page':>8}")
    for row in listing_rows:
        print(f"{row['sites']:>6} | {row['pages']:>5} | {row['updates']:>7} | {row['wall_seconds']:>8} | "
              f"{row['mean_page_ms']:>8}")
    print("\nA queued sync of the whole fleet (REST v2), wall time next to the capacity model (ground truth)")
    print(f"{'sites':>6} | {'scale':>6} | {'workers':>7} | {'work (s)':>8} | {'bound (s)':>9} | {'cron (s)':>8} | "
          f"{'wall (s)':>8} | status")
    for row in job_rows:
        print(f"{row['sites']:>6} | {row['time_scale']:>6} | {row['workers']:>7} | {row['modelled_work_seconds']:>8} | "
              f"{row['lower_bound_wall_seconds']:>9} | {row['cron_delay_wall_seconds']:>8} | "
              f"{row['wall_seconds']:>8} | {row['job_status']}")
    print("\nThe capacity model next to a real dashboard (sync-sites-v1 over a real socket at --time-scale 0.05,")
    print("8 workers, 0.1 s bootstrap, 2 s a site, gateway 60 s, MainWP's default connection limits; modelled")
    print("seconds = wall / time scale)")
    print(f"{'case':<42} | {'real dashboard':<58} | {'status':>6} | {'answered (s)':>12} | {'landed (s)':>10}")
    for row in model_rows:
        print(f"{row['case']:<42} | {row['real']:<58} | {row['status']:>6} | {row['answered_s']:>12} | "
              f"{row['work_landed_s']:>10}")
    out = ROOT / "bench" / "results" / "emulator.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "python": platform.python_version(),
                "startup": startup,
                "throughput": throughput_rows,
                "paged_listing": listing_rows,
                "job_against_capacity": job_rows,
                "model_against_the_real_dashboard": model_rows,
            },
            indent=2,
        )
    )
    print(f"\nwritten {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
