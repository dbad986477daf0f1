"""Client benchmark: wall time and CPU of this process (the client's share; the emulator runs in its own process)
for each fleet-wide call the nightly pipeline makes, at 1,000 and 10,000 sites against `fleet emulator serve`.

Calls are made the way the pipeline makes them: whole listings for sites, clients, monitors and ignore lists;
`list_updates(include=...)` in slices of 100 sites, 4 at once; `sync_sites`, `check_sites` and `run_updates`
(every plugin) in calls of 200 sites (the dashboard's batch threshold, so they answer at once), 8 at once.
Read-only calls are repeated and the median kept; `run_updates` changes the fleet and runs once, last.

Run: `python bench/client.py [--sites 1000 10000] [--repeat 3] [--label after]`.
Prints a table and writes bench/results/client.json (rows of earlier labels are kept, so a before and an after
run sit side by side).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # the script's own directory would shadow the `emulator` package

from bench.emulator import start_server, stop_server  # noqa: E402
from dashboard.client import DashboardClient  # noqa: E402
from fleet.pacing.fan_out import chunked, fan_out  # noqa: E402
from fleet.rules.execution import split_evenly  # noqa: E402

OUT = ROOT / "bench" / "results" / "client.json"
INCLUDE_SLICE = 100  # fleet/engine/detection.py INCLUDE_LIMIT
SITES_PER_CALL = 200  # the pipeline's batch_threshold / sites_per_call
CONCURRENCY = 8  # the pipeline's default concurrency


class CountingTransport(httpx.AsyncHTTPTransport):
    """Counts the requests the client sends, to show what page sizes cost in round trips."""

    count = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.count += 1
        return await super().handle_async_request(request)


def fleet_calls(client: DashboardClient, site_ids: list[int]) -> list[tuple[str, bool, Callable[[], Awaitable[int]]]]:
    """(label, repeatable, call returning the number of items it read), in the order they run."""

    async def listed(call: Awaitable[list[Any]]) -> int:
        return len(await call)

    async def updates() -> int:
        parts = await fan_out(chunked(site_ids, INCLUDE_SLICE), lambda ids: client.list_updates(include=ids), 4)
        return sum(map(len, parts))

    def batches(call: Callable[[list[int]], Awaitable[Any]], items: Callable[[Any], list[Any]]) -> Any:
        async def run() -> int:
            starts = await fan_out(split_evenly(site_ids, SITES_PER_CALL), call, CONCURRENCY)
            if any(start.queued for start in starts):
                raise RuntimeError("a call was queued as a batch job: the benchmark expects immediate answers")
            return sum(len(items(start.result)) for start in starts)
        return run

    return [
        ("list_sites()", True, lambda: listed(client.list_sites())),
        ("list_clients()", True, lambda: listed(client.list_clients())),
        ("list_monitors()", True, lambda: listed(client.list_monitors())),
        ("list_ignored_updates()", True, lambda: listed(client.list_ignored_updates())),
        ("list_updates(include=100 ids) x n", True, updates),
        ("sync_sites(200 ids) x n", True, batches(client.sync_sites, lambda r: r.synced)),
        ("check_sites(200 ids) x n", True, batches(client.check_sites, lambda r: r.checked)),
        ("run_updates(200 ids, plugins) x n", False,
         batches(lambda ids: client.run_updates(ids, ["plugin"]), lambda r: r.updated)),
    ]


async def measure(credentials: dict[str, Any], sites: int, repeat: int, label: str) -> list[dict[str, Any]]:
    counter = CountingTransport()
    rows = []
    async with DashboardClient.from_credentials(credentials, transport=counter, read_timeout=300) as client:
        await client.list_abilities()  # the catalog is read once per client; not part of any call below
        site_ids = sorted(site.id for site in await client.list_sites())
        for name, repeatable, call in fleet_calls(client, site_ids):
            runs = []
            for _ in range(repeat if repeatable else 1):
                requests, cpu, wall = counter.count, time.process_time(), time.perf_counter()
                items = await call()
                runs.append((time.perf_counter() - wall, time.process_time() - cpu, counter.count - requests, items))
            rows.append({
                "label": label, "sites": sites, "call": name, "runs": len(runs),
                "wall_s": round(statistics.median(r[0] for r in runs), 3),
                "cpu_s": round(statistics.median(r[1] for r in runs), 3),
                "requests": runs[0][2], "items": runs[0][3],
            })
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    header = (f"{'label':<8} {'sites':>6} {'call':<36} {'wall s':>7} {'cpu s':>7} {'cpu ms/site':>11} "
              f"{'requests':>8} {'items':>7}")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r['label']:<8} {r['sites']:>6} {r['call']:<36} {r['wall_s']:>7.3f} {r['cpu_s']:>7.3f} "
                     f"{1000 * r['cpu_s'] / r['sites']:>11.3f} {r['requests']:>8} {r['items']:>7}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each read-only call (the median is kept)")
    parser.add_argument("--label", default="current", help="name of this run in client.json (e.g. before, after)")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for sites in args.sites:
        with tempfile.TemporaryDirectory() as tmp:
            credentials_path = Path(tmp) / "credentials.json"
            process, _ = start_server(sites, credentials_path)
            try:
                credentials = json.loads(credentials_path.read_text())
                rows += asyncio.run(measure(credentials, sites, args.repeat, args.label))
            finally:
                stop_server(process)
    kept = json.loads(OUT.read_text()).get("results", []) if OUT.exists() else []
    results = [row for row in kept if row.get("label") != args.label] + rows
    print()
    print(table(results))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"python": platform.python_version(), "machine": platform.platform(),
                               "results": results}, indent=2))
    print(f"\nwritten {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
