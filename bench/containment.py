"""What containment costs a night: the nightly flow over 1,000 sites of the realistic fault profile (1% of the
pending releases break their site, 60% of those at load), three ways against a fresh emulator each:

- `no-probes`: the home-page probe off (no probe before, after each step nor after the night: nothing is contained);
- `report`: the probes on, `contain: report` (a break is tied to its step; nothing is deactivated);
- `deactivate`: the default (the culprit found by bisection and left deactivated, a site down alerted at once).

For each: wall time, the requests the flow sent to the dashboard, the plugin (de)activations the emulator
worked, the dashboard's modelled work (its own ledger, in seconds) and the broken sites by their
containment. The extra of per-step probes is `report` against `no-probes`; of the bisection, `deactivate` against
`report`; both as a share of the `deactivate` night's wall time (the target: under 5%).

Run: `python bench/containment.py [--sites 1000] [--time-scale 0.01] [--variants ...]`.
Prints a table and writes bench/results/containment.json.
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
from collections import Counter
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # bench/emulator.py would shadow the `emulator` package

from bench.nightly import (  # noqa: E402 - the harness of the nightly benchmark, run as a script too
    ROOT,
    RequestCounter,
    measure,
    modelled_work,
    pipeline_env,
    start_prefect_server,
    truth,
)

VARIANTS = ("no-probes", "report", "deactivate")


def run_night(credentials: dict[str, Any], sites: int, time_scale: float, variant: str) -> dict[str, Any]:
    from flows.nightly import nightly_maintenance

    report_dir = tempfile.mkdtemp(prefix="bench-containment-")
    pipeline_env(credentials, report_dir, "pipeline", time_scale)
    os.environ["FLEET_PROBE_URL_TEMPLATE"] = credentials["site_url_template"]
    os.environ["FLEET_PROBE_SITES"] = "false" if variant == "no-probes" else "true"
    policy = Path(report_dir) / "policy.yaml"
    policy.write_text("contain: report\n" if variant == "report" else "contain: deactivate\n")
    requests = RequestCounter(credentials["base_url"])
    wall = time.perf_counter()

    async def night() -> Any:  # a night that broke sites ends Failed: its summary path rides on the error
        state = await nightly_maintenance(send_report=False, policy_file=str(policy), return_state=True)
        return await state.result(raise_on_failure=False)

    result = asyncio.run(night())
    wall = time.perf_counter() - wall
    summary_path = Path(result if isinstance(result, str) else result.summary_path)
    return {"variant": variant, "sites": sites, "wall_s": wall, "requests": requests.count,
            **from_summary(summary_path), **from_emulator(truth(credentials))}


def from_summary(path: Path) -> dict[str, Any]:
    from fleet.model.summary import Summary

    summary = Summary.read(path)
    statuses = Counter(alarm.containment.status.value if alarm.containment else "after the night"
                       for alarm in summary.broken)
    rounds = [alarm.containment.rounds for alarm in summary.broken if alarm.containment]
    return {"broken": len(summary.broken), "containment": dict(statuses), "rounds": sum(rounds),
            "items": len(summary.items)}


def from_emulator(state: dict[str, Any]) -> dict[str, Any]:
    capacity = state.get("capacity", {})
    operations = capacity.get("operations", {})
    work = modelled_work(capacity)
    return {"plugin_actions": operations.get("plugin_action", 0), "work_s": sum(work.values()), "work": work}


def child(variant: str, credentials_file: Path, sites: int, time_scale: float) -> None:
    credentials = json.loads(credentials_file.read_text())
    print("RESULT " + json.dumps(run_night(credentials, sites, time_scale, variant)), flush=True)


def table(results: list[dict[str, Any]]) -> str:
    """One row per variant, then the extras against the variant before it, as a share of the full night."""
    header = (f"{'variant':<11} {'sites':>6} {'wall s':>8} {'requests':>8} {'(de)activations':>15} "
              f"{'work s':>8} {'broken':>6} {'rounds':>6}  containment")
    rows = [header, "-" * len(header)]
    for r in results:
        rows.append(f"{r['variant']:<11} {r['sites']:>6} {r['wall_s']:>8.1f} {r['requests']:>8} "
                    f"{r['plugin_actions']:>15} {r['work_s']:>8.1f} {r['broken']:>6} {r['rounds']:>6}  "
                    f"{', '.join(f'{k} {v}' for k, v in sorted(r['containment'].items())) or '-'}")
    by = {r["variant"]: r for r in results}
    full = by.get("deactivate")
    for name, more, less in (("per-step probes", "report", "no-probes"), ("bisection", "deactivate", "report")):
        if full and more in by and less in by:
            extra_wall = by[more]["wall_s"] - by[less]["wall_s"]
            rows.append(f"extra of {name}: {extra_wall:+.1f} s wall ({100 * extra_wall / full['wall_s']:+.1f}% of "
                        f"the night), {by[more]['requests'] - by[less]['requests']:+d} requests, "
                        f"{by[more]['work_s'] - by[less]['work_s']:+.1f} s of modelled dashboard work")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "containment.json")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--credentials", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.credentials, args.sites, args.time_scale)
        return
    results = []
    with tempfile.TemporaryDirectory() as home:
        server, prefect_env = start_prefect_server(Path(home))
        try:
            for variant in args.variants:
                results.append(measure(variant, args.sites, args.time_scale, prefect_env, script=__file__,
                                       faults="realistic"))
                print(table(results[-1:]).splitlines()[2], flush=True)
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
