"""The night over many dashboards on one machine: `maintain-dashboards` on a local process pool (LocalEstate: a
Prefect server, two `prefect worker` processes, emulated dashboards) for 1, 3 and 6 dashboards, and what Prefect's
own server sustains on this machine (task runs and flow runs per second).

Per point: the fan-out's wall time (its flow run's start to end, from the server), each night's wait in the queue
(created to running: the worker's poll and the process start), each night's run time against its emulator's
capacity-model lower bound, and the task runs the nights made. Then, on the same server, a flow of no-op tasks
and a flow of no-op subflows give the server's task-run and flow-run rates.

Run: `python bench/dashboards.py [--dashboards 1 3 6] [--sites 20] [--workers 2] [--time-scale 0.002]`.
Prints a table and writes bench/results/dashboards.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import UUID

# `python bench/dashboards.py` puts bench/ first on sys.path, where bench/emulator.py would hide the emulator package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from prefect import flow, task  # noqa: E402
from prefect.client.orchestration import get_client  # noqa: E402
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId  # noqa: E402
from prefect.settings import PREFECT_API_URL, temporary_settings  # noqa: E402

from cli.estate_demo import LocalEstate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@task
async def no_op(number: int) -> int:
    return number


@flow
async def many_tasks(count: int) -> int:
    return len(await asyncio.gather(*(no_op(n) for n in range(count))))


@flow
async def one_flow() -> int:
    return 1


@flow
async def many_flows(count: int) -> int:
    return sum([await one_flow() for _ in range(count)])


async def night_figures(fan_out_id: str) -> dict[str, Any]:
    async with get_client() as client:
        fan_out = await client.read_flow_run(UUID(fan_out_id))
        children = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[fan_out.id]))
        )
        task_runs = 0
        for child in children:
            matching = {"flow_runs": {"id": {"any_": [str(child.id)]}}}
            answer = await client._client.post("/task_runs/count", json=matching)  # no count method in 3.8
            task_runs += int(answer.json())
    assert fan_out.start_time and fan_out.end_time
    return {
        "fan_out_s": (fan_out.end_time - fan_out.start_time).total_seconds(),
        "queue_s": [round((c.start_time - c.created).total_seconds(), 2)
                    for c in children if c.start_time and c.created],
        "night_s": [round(c.total_run_time.total_seconds(), 2) for c in children],
        "task_runs": task_runs,
    }


def server_rates(tasks: int, flows: int) -> dict[str, float]:
    started = time.perf_counter()
    asyncio.run(many_tasks(tasks))
    task_s = time.perf_counter() - started
    started = time.perf_counter()
    asyncio.run(many_flows(flows))
    flow_s = time.perf_counter() - started
    return {"task_runs_per_s": round(tasks / task_s, 1), "flow_runs_per_s": round(flows / flow_s, 2),
            "tasks": tasks, "flows": flows}


def measure(dashboards: int, sites: int, workers: int, time_scale: float, rates: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-dashboards-") as output:
        started = time.perf_counter()
        with LocalEstate(Path(output), dashboards=dashboards, workers=workers, sites=sites,
                         time_scale=time_scale) as estate:
            setup_s = time.perf_counter() - started
            started = time.perf_counter()
            run = estate.run_night()
            command_s = time.perf_counter() - started
            bounds = [server.emulator.capacity.lower_bound_seconds() for server in estate.emulators.values()]
            with temporary_settings({PREFECT_API_URL: estate.api_url}):
                figures = asyncio.run(night_figures(run.flow_run_id))
                measured_rates = server_rates(300, 30) if rates else {}
        completed = sum(night.status.value == "completed" for night in run.estate.nights)
    return {"dashboards": dashboards, "sites_each": [n.tally.sites if n.tally else 0 for n in run.estate.nights],
            "workers": workers, "time_scale": time_scale, "setup_s": round(setup_s, 1),
            "command_s": round(command_s, 1), "completed": completed, "lower_bound_s": [round(b, 2) for b in bounds],
            **figures, **measured_rates}


def table(results: list[dict[str, Any]]) -> str:
    rows = ["dashboards  sites  workers  fan-out s  longest night s  max bound s  max queue s  task runs  "
            "task runs/s (night)"]
    for r in results:
        longest = max(r["night_s"] or [0])
        rows.append(f"{r['dashboards']:>10} {sum(r['sites_each']):>6} {r['workers']:>8} {r['fan_out_s']:>10.1f} "
                    f"{longest:>16.1f} {max(r['lower_bound_s'] or [0]):>12.2f} {max(r['queue_s'] or [0]):>12.1f} "
                    f"{r['task_runs']:>10} {r['task_runs'] / r['fan_out_s']:>20.1f}")
    rated = [r for r in results if "task_runs_per_s" in r]
    for r in rated:
        rows.append(f"Prefect server ({r['dashboards']} nights done): {r['task_runs_per_s']} no-op task runs/s, "
                    f"{r['flow_runs_per_s']} no-op subflow runs/s")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dashboards", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--sites", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--time-scale", type=float, default=0.002)
    args = parser.parse_args()
    results = []
    for dashboards in args.dashboards:
        results.append(measure(dashboards, args.sites, args.workers, args.time_scale,
                               rates=dashboards == args.dashboards[-1]))
        print(table(results[-1:]).splitlines()[1], flush=True)
    print(table(results))
    out = ROOT / "bench" / "results" / "dashboards.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(),
                               "cpus": os.cpu_count(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
