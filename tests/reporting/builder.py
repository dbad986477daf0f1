"""Realistic run summaries for report tests: several clients, every outcome, a few nights for the trends.

`python -m tests.reporting.builder DIR` writes a set of nights under DIR (used for docs/sample-report.png).
"""

from __future__ import annotations

import random
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from fleet.model.summary import Cohort, HealthCheck, Item, Job, Outcome, ReportClient, SiteReport, Summary, UpdateType

XSS = "<script>alert(1)</script>"
CLIENTS = {
    "Acme Dental": [("acmedental.com", "Acme Dental"), ("book.acmedental.com", "Acme Dental Booking"),
                    ("acme-dental-kids.com", "Acme Kids Dentistry")],
    "Birch & Co Architects": [("birchandco.com", "Birch & Co"), ("birch-portfolio.com", "Birch Portfolio")],
    "Northwind Bakery": [("northwindbakery.co.uk", "Northwind Bakery"),
                         ("shop.northwindbakery.co.uk", "Northwind Shop"),
                         ("northwind-catering.co.uk", "Northwind Catering")],
    "Orchard Physio": [("orchardphysio.ie", "Orchard Physio"), ("orchard-pilates.ie", "Orchard Pilates")],
}  # fmt: skip
UNASSIGNED = [("staging.agency.example", "Agency staging")]
PLUGINS = [
    ("woocommerce", "WooCommerce", "9.3.3", "9.4.0"),
    ("wordpress-seo", "Yoast SEO", "23.7", "23.8"),
    ("contact-form-7", "Contact Form 7", "5.9.8", "6.0"),
    ("elementor", "Elementor", "3.24.7", "3.25.4"),
    ("wordfence", "Wordfence Security", "7.11.7", "8.0.0"),
    ("updraftplus", "UpdraftPlus: WP Backup & Migration", "1.24.6", "1.24.8"),
    ("xss-probe", XSS, "1.0", "1.1"),
]
THEMES = [("astra", "Astra", "4.8.3", "4.8.4"), ("twentytwentyfour", "Twenty Twenty-Four", "1.2", "1.3")]
REASONS = {
    Outcome.failed: [
        "Download failed. cURL error 28: Operation timed out after 30001 milliseconds",
        "Could not copy file: wp-content/plugins/elementor/includes/base.php (disk full?)",
        "PHP Fatal error: Uncaught Error: Call to undefined function wc_get_container()",
    ],
    Outcome.held: ["Client asked for a freeze until the Black Friday sale is over", "Pinned: custom patch applied"],
    Outcome.delayed: ["Released 1 day ago; minimum age is 3 days"],
    Outcome.ignored: ["On the dashboard's global ignore list"],
    Outcome.excluded: ["Major version: semver rule allows minor and patch only", "Core updates are off for this tag"],
    Outcome.unchanged: ["Reported success but the installed version is still the old one"],
    Outcome.skipped: ["Site offline: connection refused"],
    Outcome.unknown: ["No answer within 300 s"],
}
RULES = {Outcome.held: "hold", Outcome.excluded: "semver:minor", Outcome.ignored: "ignore:global"}


def _item(site: SiteReport, kind: UpdateType, entry: tuple[str, str, str, str], outcome: Outcome, night: date,
          rng: random.Random) -> Item:  # fmt: skip
    slug, name, old, new = entry
    reason = rng.choice(REASONS[outcome]) if outcome in REASONS else None
    until = None
    if outcome is Outcome.held:
        until = night + timedelta(days=rng.randint(3, 20))
    elif outcome is Outcome.delayed:
        until = night + timedelta(days=2)
    return Item(
        site_id=site.site_id, site_url=site.site_url, site_name=site.site_name, client=site.client, type=kind,
        slug=slug, name=name, from_version=old, to_version=new, outcome=outcome, reason=reason,
        rule=RULES.get(outcome), until=until,
    )  # fmt: skip


def build_summary(
    night: date, *, seed: int = 7, updates: bool = True, run_id: str | None = None, xss_probe: bool = True
) -> Summary:
    """One night of a small agency fleet. With `updates`, every outcome appears at least once; with `xss_probe`
    one plugin is named like a script injection."""
    plugins = PLUGINS if xss_probe else [p for p in PLUGINS if p[1] != XSS]
    rng = random.Random(f"{seed}-{night.isoformat()}")
    sites: list[SiteReport] = []
    domains = [(client, *site) for client, named in CLIENTS.items() for site in named]
    domains += [(None, *site) for site in UNASSIGNED]
    for site_id, (client, domain, site_name) in enumerate(domains, start=1):
        status = "offline" if domain == "birch-portfolio.com" else "online"
        check = HealthCheck(online=status == "online", http_code=200 if status == "online" else None,
                          response_ms=round(rng.uniform(180, 900), 1), probe_ok=True)  # fmt: skip
        if domain == "shop.northwindbakery.co.uk":
            check = HealthCheck(
                online=True, http_code=500, response_ms=2410.0, probe_ok=False, open_incidents=1,
                probe_error="Checkout page returned HTTP 500 after the update",
            )  # fmt: skip
        sites.append(SiteReport(site_id=site_id, site_url=f"https://{domain}", site_name=site_name, client=client,
                          status=status, check=check))  # fmt: skip
    items: list[Item] = []
    if updates:
        weights = {Outcome.updated: 14, Outcome.failed: 2, Outcome.held: 1, Outcome.delayed: 1, Outcome.ignored: 1,
                   Outcome.excluded: 1, Outcome.unchanged: 1, Outcome.unknown: 1}  # fmt: skip
        for site in sites:
            pending = [(UpdateType.plugin, p) for p in rng.sample(plugins, rng.randint(2, 5))]
            pending += [(UpdateType.theme, t) for t in rng.sample(THEMES, rng.randint(0, 1))]
            if rng.random() < 0.3:
                pending.append((UpdateType.core, ("wordpress", "WordPress", "6.6.2", "6.7")))
            if rng.random() < 0.5:
                pending.append((UpdateType.translation, ("de_DE", "German (de_DE)", None, None)))
            for kind, entry in pending:
                if site.status != "online":
                    outcome = Outcome.skipped
                else:
                    outcome = rng.choices(list(weights), weights=list(weights.values()))[0]
                items.append(_item(site, kind, entry, outcome, night, rng))
        missing = [o for o in Outcome if o not in {i.outcome for i in items}]
        online_items = [i for i in items if i.outcome is not Outcome.skipped]
        for outcome, item in zip(missing, online_items, strict=False):
            item.outcome = outcome
            item.reason = REASONS[outcome][0] if outcome in REASONS else None
            item.rule = RULES.get(outcome)
            item.until = night + timedelta(days=5) if outcome in (Outcome.held, Outcome.delayed) else None
    for site in sites:
        site.updated = any(i.site_id == site.site_id and i.outcome is Outcome.updated for i in items)
    started = datetime(night.year, night.month, night.day, 2, 0, tzinfo=UTC)
    return Summary(
        run_id=run_id or f"nightly-{night.isoformat()}",
        started_at=started,
        finished_at=started + timedelta(minutes=rng.randint(9, 40), seconds=rng.randint(0, 59)),
        dashboard="https://dashboard.agency.example",
        counts=Summary.count(items),
        items=items,
        sites=sites,
        clients=[
            ReportClient(name="Acme Dental", email="office@acmedental.com"),
            ReportClient(name="Birch & Co Architects", email="studio@birchandco.com", recipients=["it@birchandco.com"]),
            ReportClient(name="Northwind Bakery", email="hello@northwindbakery.co.uk"),
            ReportClient(name="Orchard Physio", email=None),
        ],
        jobs=[Job(id="job-1", type="update_plugins", sites=len(sites), status="completed", seconds_waited=41.5,
                  polls=9)],  # fmt: skip
        cohorts=[Cohort(name="canary", sites=2), Cohort(name="rest", sites=len(sites) - 2)],
    )


def write_nights(
    base: Path, nights: int = 7, *, last: date = date(2026, 11, 21), seed: int = 7, xss_probe: bool = True
) -> list[Path]:
    """Write `nights` consecutive runs under `base`, oldest first; return their run directories."""
    run_dirs = []
    for back in range(nights - 1, -1, -1):
        night = last - timedelta(days=back)
        run_dir = base / f"{night.isoformat()}T02-00-00"
        build_summary(night, seed=seed, xss_probe=xss_probe).write(run_dir)
        run_dirs.append(run_dir)
    return run_dirs


if __name__ == "__main__":
    for path in write_nights(Path(sys.argv[1]), xss_probe=False):
        print(path)
