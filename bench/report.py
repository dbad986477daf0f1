"""Report benchmark: render and write (as .eml) every report of a run for fleets of 1,000 and 10,000 sites.

Each size is written as 7 synthetic nights (one client per 25 sites, about 5 pending items per site, every
outcome), then reported in a fresh child process that has already imported the report code. Measures the
wall time of rendering (aggregation, charts, three formats per report, files) and of delivery without SMTP
settings (MIME messages from the files, .eml files, summary.json rewritten), the size of the operator's
message, and memory: the child's RSS before the report step, its peak during it (Linux: the high-water mark
is reset through /proc/self/clear_refs first) and the growth between the two, which must not follow the
number of clients.

Run: `python bench/report.py [--sites 1000 10000]`. Prints a table and writes bench/results/report.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NIGHTS = 7
SITES_PER_CLIENT = 25
OUTCOME_WEIGHTS = {"updated": 60, "failed": 6, "unchanged": 3, "held": 5, "ignored": 4, "delayed": 5, "excluded": 6,
                   "skipped": 8, "deferred": 3, "unknown": 3}


def write_fleet(base: Path, sites: int, seed: int = 1) -> Path:
    """Seven nights of a synthetic fleet under `base`; returns the last run directory."""
    from fleet.model.summary import HealthCheck, Item, Outcome, ReportClient, SiteReport, Summary, UpdateType

    rng = random.Random(seed)
    clients = [f"Client {n:04d}" for n in range(max(1, sites // SITES_PER_CLIENT))]
    plugins = [(f"plugin-{n}", f"Plugin {n}") for n in range(120)]
    outcomes = list(Outcome)  # every outcome is drawn: one added without a weight is a KeyError here, not a skew
    weights = [OUTCOME_WEIGHTS[outcome] for outcome in outcomes]
    fleet = [
        SiteReport(site_id=n, site_url=f"https://site{n}.example", site_name=f"Site {n}", client=rng.choice(clients),
             check=HealthCheck(online=True, http_code=200, response_ms=300.0, probe_ok=rng.random() > 0.01))
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
            clients=[ReportClient(name=c, email=f"c{i}@example.com") for i, c in enumerate(clients)],
        )
        last = base / started.strftime("%Y-%m-%dT%H-%M-%S")
        summary.write(last)
    return last


def _status_mib(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return round(int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M)[1]) / 1024, 1)


def measure(run_dir: Path) -> dict[str, object]:
    """In a child process with the report code imported: one report step, memory seen from outside its data."""
    import gc

    from reporting.run_report import deliver_reports, render_reports
    from reporting.settings import MailSettings

    settings = MailSettings(_env_file=None, report_to=["ops@example.com"])
    gc.collect()
    before = _status_mib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM (the peak) to the current RSS
    start = time.perf_counter()
    rendered = render_reports(run_dir)
    rendered_at = time.perf_counter()
    deliveries = deliver_reports(rendered, settings)
    delivered_at = time.perf_counter()
    peak = _status_mib("VmHWM")
    reports = len(rendered.reports)
    return {
        "reports": reports,
        "render_s": round(rendered_at - start, 1),
        "deliver_s": round(delivered_at - rendered_at, 1),
        "ms_per_report": round(1000 * (delivered_at - start) / reports, 1),
        "operator_eml_kib": round((run_dir / "operator.eml").stat().st_size / 1024, 1),
        "rss_before_mib": before,
        "peak_rss_mib": peak,
        "growth_mib": round(peak - before, 1),
        "ok": all(d.accepted or d.eml_path for d in deliveries),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    if not Path("/proc/self/clear_refs").exists():
        sys.exit("this benchmark reads peak RSS from /proc (Linux only)")
    rows = []
    for sites in args.sites:
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = write_fleet(Path(tmp), sites)
            child = subprocess.run([sys.executable, __file__, "--child", str(run_dir)], capture_output=True,
                                   text=True, cwd=ROOT)  # fmt: skip
        if child.returncode:
            sys.exit(f"{sites} sites failed:\n{child.stderr[-3000:]}")
        rows.append({"sites": sites, "items": sites * 5, **json.loads(child.stdout.strip().splitlines()[-1])})
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
