"""Report benchmark: render and write (as .eml) every report of a run for fleets of 1,000 and 10,000 sites.

Each size is written as 7 synthetic nights (one client per 25 sites, about 5 pending items per site, every
outcome), the last with every long list a report has, each longer at 10,000 sites than a report once showed:
sites broken (0.3%) and already down (0.6%), sites failing their check (1%), sites deferred by three maintenance
windows (5%), sites back in maintenance (0.5%), security fixes (5 of the 120 plugins fix a known vulnerability)
and installed items with no fix (1% of the sites). It is reported in a fresh child process that has already
imported the report code. Measures the wall time of rendering (aggregation, charts, three formats per report,
files; also as the process's CPU time, which a busy machine changes less) and of delivery without SMTP settings
(MIME messages from the files, .eml files, summary.json rewritten); memory: the child's RSS before the report
step, its peak during it (Linux: the high-water mark is reset through /proc/self/clear_refs first) and the
growth between the two, which must not follow the number of clients; and the operator's report as its reader
gets it: the HTML file's and the message's size, the CPU time to render its HTML alone, and, where a Chromium
is installed, the time the browser takes to load it and to lay it out with every fold opened.

Run: `python bench/report.py [--sites 1000 10000]`. Prints a table and writes bench/results/report.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NIGHTS = 7
SITES_PER_CLIENT = 25
WINDOWS = ["outside its maintenance window (22:00-06:00 Europe/Dublin); next window opens Sat 21 Nov 2026 22:00 GMT",
           "outside its maintenance window (01:00-05:00 America/New_York)", "blackout: launch week"]
FIXING = 5  # plugins whose update fixes a known vulnerability
OUTCOME_WEIGHTS = {"updated": 60, "failed": 6, "unchanged": 3, "held": 5, "ignored": 4, "delayed": 5, "excluded": 6,
                   "skipped": 8, "deferred": 3, "unknown": 3, "not_switched_on": 1}


def with_long_lists(summary: object, rng: random.Random) -> None:
    """The last night's long lists: broken and already-down sites, failed checks, deferred and revived sites,
    known vulnerabilities (fixed, not fixed, no fix)."""
    from fleet.model.summary import HealthCheck, Outcome, SiteAlarm, Suspect, UpdateType
    from fleet.model.vulnerability import (
        FeedStatus,
        ItemVulnerabilities,
        Vulnerability,
        VulnerabilityClass,
        VulnerableInstall,
    )

    night = summary.finished_at
    for site in summary.sites:
        draw = rng.random()
        if draw < 0.003:
            summary.broken.append(SiteAlarm(
                site_id=site.site_id, site_url=site.site_url, site_name=site.site_name, client=site.client,
                saw="HTTP 500 on the home page", dashboard_page=f"https://dashboard.example/site/{site.site_id}",
                suspects=[Suspect(type=UpdateType.plugin, slug="plugin-7", name="Plugin 7", from_version="1.0",
                                  to_version="1.7")]))
            site.check = HealthCheck(online=True, http_code=500, response_ms=900.0, probe_ok=False,
                                     probe_error="HTTP 500 on the home page")
        elif draw < 0.009:
            summary.already_down.append(SiteAlarm(site_id=site.site_id, site_url=site.site_url,
                                                  site_name=site.site_name, client=site.client,
                                                  saw="connection refused before any update"))
        elif draw < 0.059:
            site.deferred = WINDOWS[int(draw * 1000) % len(WINDOWS)]
            site.opens_at = night + timedelta(hours=20)
        elif draw < 0.064:
            site.revived = True
        if rng.random() < 0.01:
            summary.exposure.append(VulnerableInstall(
                site_id=site.site_id, site_url=site.site_url, site_name=site.site_name, client=site.client,
                type="plugin", slug="plugin-119", name="Plugin 119", version="2.0", vulnerabilities=[Vulnerability(
                    id=f"x{site.site_id}", cve="CVE-2026-20001", cvss_score=5.3, cvss_rating="Medium",
                    published=(night - timedelta(days=12)).strftime("%Y-%m-%d %H:%M:%S"))]))
    fixes = {f"plugin-{n}": ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(Vulnerability(
        id=f"w{n}", cve=f"CVE-2026-{10000 + n}", cvss_score=9.8, cvss_rating="Critical",
        published=(night - timedelta(hours=30)).strftime("%Y-%m-%d %H:%M:%S")),)) for n in range(FIXING)}
    for item in summary.items:
        item.security = fixes.get(item.slug, ItemVulnerabilities(VulnerabilityClass.routine))
        if item.outcome is Outcome.deferred:
            item.reason = WINDOWS[0]
    summary.vulnerability_feed = FeedStatus(source="https://feed.example/vulnerabilities",
                                            fetched_at=(night - timedelta(hours=3)).isoformat(), records=38_928)


def write_fleet(base: Path, sites: int, seed: int = 1) -> Path:
    """Seven nights of a synthetic fleet under `base`, the last with long lists; returns the last run directory."""
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
        if night == NIGHTS - 1:
            with_long_lists(summary, rng)
        last = base / started.strftime("%Y-%m-%dT%H-%M-%S")
        summary.write(last)
    return last


def _status_mib(field: str) -> float:
    status = Path("/proc/self/status").read_text()
    return round(int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M)[1]) / 1024, 1)


def in_chromium(html: Path) -> tuple[float | None, float | None]:
    """Milliseconds for the system Chromium to load the page, and then to lay it out with every fold opened (None
    without a Chromium or Playwright)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None, None
    if chromium is None:
        return None, None
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 760, "height": 1400})
        page.goto("about:blank")
        start = time.perf_counter()
        page.goto(html.as_uri(), wait_until="load")
        page.evaluate("() => document.body.offsetHeight")  # the first layout
        loaded = time.perf_counter()
        page.evaluate("() => { document.querySelectorAll('details').forEach(d => d.open = true); "
                      "return document.body.offsetHeight; }")
        opened = time.perf_counter()
        browser.close()
    return round(1000 * (loaded - start)), round(1000 * (opened - loaded))


def measure(run_dir: Path) -> dict[str, object]:
    """In a child process with the report code imported: one report step, memory seen from outside its data."""
    import gc

    from reporting.render import render_html
    from reporting.run_report import RunWindow, deliver_reports, render_reports
    from reporting.settings import MailSettings

    settings = MailSettings(_env_file=None, report_to=["ops@example.com"])
    gc.collect()
    before = _status_mib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM (the peak) to the current RSS
    start, cpu = time.perf_counter(), time.process_time()
    rendered = render_reports(run_dir)
    rendered_at, render_cpu = time.perf_counter(), time.process_time() - cpu
    deliveries = deliver_reports(rendered, settings)
    delivered_at = time.perf_counter()
    peak = _status_mib("VmHWM")
    reports = len(rendered.reports)
    data = RunWindow(run_dir, 14).report(None, 100)
    began = time.process_time()
    render_html(data)
    operator_html_cpu_s = time.process_time() - began
    html = rendered.path(rendered.operator, ".html")
    load_ms, unfold_ms = in_chromium(html)
    return {
        "reports": reports,
        "render_s": round(rendered_at - start, 1),
        "render_cpu_s": round(render_cpu, 1),
        "deliver_s": round(delivered_at - rendered_at, 1),
        "ms_per_report": round(1000 * (delivered_at - start) / reports, 1),
        "operator_html_kib": round(html.stat().st_size / 1024, 1),
        "operator_html_cpu_s": round(operator_html_cpu_s, 2),
        "operator_eml_kib": round((run_dir / "operator.eml").stat().st_size / 1024, 1),
        "largest_client_html_kib": round(max(rendered.path(report, ".html").stat().st_size
                                             for report in rendered.reports[1:]) / 1024, 1),
        "chromium_load_ms": load_ms,
        "chromium_unfold_ms": unfold_ms,
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
