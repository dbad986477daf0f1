"""Report benchmark: render and write (as .eml) every report of a run for fleets of 1,000 and 10,000 sites.

Each size runs in its own process over 7 synthetic nights (one client per 25 sites, about 5 pending items per
site, every outcome). Measures the wall time of `render_run(send=True)` without SMTP settings (aggregation,
charts, three formats per report, MIME messages, .eml files, summary.json rewritten), the share of it spent per
report, the size of the operator's message, and the process's peak RSS.

Run: `python bench/report.py [--sites 1000 10000]`. Prints a table and writes bench/results/report.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NIGHTS = 7
SITES_PER_CLIENT = 25


def write_fleet(base: Path, sites: int, seed: int = 1) -> Path:
    """Seven nights of a synthetic fleet under `base`; returns the last run directory."""
    from fleet.summary import Client, Item, Outcome, Site, SiteCheck, Summary, UpdateType

    rng = random.Random(seed)
    clients = [f"Client {n:04d}" for n in range(max(1, sites // SITES_PER_CLIENT))]
    plugins = [(f"plugin-{n}", f"Plugin {n}") for n in range(120)]
    outcomes = list(Outcome)
    weights = [60, 6, 3, 5, 4, 5, 6, 8, 3]
    fleet = [
        Site(site_id=n, site_url=f"https://site{n}.example", site_name=f"Site {n}", client=rng.choice(clients),
             check=SiteCheck(online=True, http_code=200, response_ms=300.0, probe_ok=rng.random() > 0.01))
        for n in range(1, sites + 1)
    ]  # fmt: skip
    last = Path()
    for night in range(NIGHTS):
        started = datetime(2026, 11, 15, 2, tzinfo=UTC) + timedelta(days=night)
        items = [
            Item(site_id=s.site_id, site_url=s.site_url, site_name=s.site_name, client=s.client,
                 type=UpdateType.plugin, slug=slug, name=name, from_version="1.0", to_version=f"1.{night + 1}",
                 outcome=outcome, reason=None if outcome is Outcome.updated else f"reason for {outcome.value}")
            for s in fleet
            for (slug, name), outcome in zip(rng.sample(plugins, 5), rng.choices(outcomes, weights, k=5), strict=True)
        ]  # fmt: skip
        summary = Summary(
            run_id=f"bench-{night}", started_at=started, finished_at=started + timedelta(hours=1), items=items,
            sites=fleet, counts=Summary.count(items),
            clients=[Client(name=c, email=f"c{i}@example.com") for i, c in enumerate(clients)],
        )
        last = base / started.strftime("%Y-%m-%dT%H-%M-%S")
        summary.write(last)
    return last


def measure(sites: int) -> dict[str, object]:
    """Run in a child process: one fleet size, fresh memory."""
    from reporting.run_report import render_run
    from reporting.settings import MailSettings

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = write_fleet(Path(tmp), sites)
        start = time.perf_counter()
        result = render_run(run_dir, send=True, settings=MailSettings(_env_file=None, report_to=["ops@example.com"]))
        seconds = time.perf_counter() - start
        operator_eml = (run_dir / "operator.eml").stat().st_size
    return {
        "sites": sites,
        "items": sites * 5,
        "reports": len(result.reports),
        "seconds": round(seconds, 2),
        "ms_per_report": round(1000 * seconds / len(result.reports), 1),
        "operator_eml_kib": round(operator_eml / 1024, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "ok": result.ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    rows = []
    for sites in args.sites:
        child = subprocess.run([sys.executable, __file__, "--child", str(sites)], capture_output=True, text=True,
                               cwd=ROOT)  # fmt: skip
        if child.returncode:
            sys.exit(f"{sites} sites failed:\n{child.stderr[-3000:]}")
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    columns = list(rows[0])
    print(" ".join(f"{c:>16}" for c in columns))
    for row in rows:
        print(" ".join(f"{row[c]!s:>16}" for c in columns))
    out = ROOT / "bench" / "results" / "report.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(), "rows": rows},
                              indent=2))  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
