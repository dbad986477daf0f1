"""Realistic run summaries for report tests: several clients, every outcome, a few nights for the trends.

`python -m tests.reporting.builder DIR` writes a set of nights under DIR (used for docs/sample-report.png);
`--dry-run` adds the dry run of the afternoon before the last night (docs/sample-dry-run-report.png);
`--looks` gives the last night screenshots too (docs/sample-*-looks.png); `--security` the vulnerability feed's
findings.
"""

from __future__ import annotations

import functools
import io
import random
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from fleet.model.summary import (
    DRY_RUN_RULE,
    Band,
    Cohort,
    HealthCheck,
    Item,
    Job,
    LastSync,
    Outcome,
    PageLook,
    ReportClient,
    SiteAlarm,
    SiteLook,
    SiteReport,
    Summary,
    Suspect,
    UpdateType,
)

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
    Outcome.deferred: ["outside its maintenance window (22:00-06:00 Europe/Dublin); next window opens Sat 21 Nov "
                       "2026 22:00 GMT"],
    Outcome.unknown: ["No answer within 300 s"],
}
RULES = {Outcome.held: "hold", Outcome.excluded: "semver:minor", Outcome.ignored: "ignore:global",
         Outcome.deferred: "window"}


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


ATTEMPTED = (Outcome.updated, Outcome.failed, Outcome.unchanged, Outcome.unknown)


def write_dry_run(base: Path, night: date, *, seed: int = 7) -> Path:
    """The dry run of the afternoon before `night`: the items that night attempts, as what the dry run would update
    (`excluded`, rule `dry_run`), planned from the dashboard's last syncs of the day before; nothing checked."""
    summary = build_summary(night, seed=seed, xss_probe=False)
    started = datetime(night.year, night.month, night.day, tzinfo=UTC) - timedelta(hours=8)  # 16:00 the day before
    for item in summary.items:
        if item.outcome in ATTEMPTED:
            item.outcome, item.rule, item.until = Outcome.excluded, DRY_RUN_RULE, None
            item.reason = f"dry run: would update {item.from_version or '?'} -> {item.to_version or 'latest'}"
    summary.items.sort(key=lambda item: item.rule != DRY_RUN_RULE)  # as a dry run writes them: what it would apply
    for site in summary.sites:
        site.check, site.updated = None, False
    summary = summary.model_copy(update={
        "run_id": f"dry-run-{night.isoformat()}", "dry_run": True, "started_at": started,
        "finished_at": started + timedelta(seconds=41), "counts": Summary.count(summary.items), "jobs": [],
        "cohorts": [], "last_sync": LastSync(oldest=started - timedelta(hours=22, minutes=40),
                                             newest=started - timedelta(minutes=12))})
    run_dir = base / f"{(night - timedelta(days=1)).isoformat()}T16-00-00-dry-run"
    summary.write(run_dir)
    return run_dir


def write_security(summary: Summary, run_dir: Path, *, exposed: int = 30) -> Summary:
    """The night with the vulnerability feed: every plugin update of a few plugins fixes a known vulnerability
    (installed, or not: held, skipped, failed, ...), and `exposed` installed items have one with no fix (more than
    a report lists before its fold); the measures across nights."""
    from fleet.model.vulnerability import (
        FeedStatus,
        ItemVulnerabilities,
        Vulnerability,
        VulnerabilityClass,
        VulnerabilityStats,
        VulnerableInstall,
        Wait,
    )

    night = summary.finished_at
    fixing = {"woocommerce", "contact-form-7", "elementor"}
    for number, item in enumerate(summary.items):
        if item.slug in fixing and item.rule != DRY_RUN_RULE:
            published = (night - timedelta(hours=9 + 30 * (number % 5))).strftime("%Y-%m-%d %H:%M:%S")
            item.security = ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(Vulnerability(
                id=f"w{number}", cve=f"CVE-2026-{10000 + number}", cvss_score=9.8 if number % 2 else 6.1,
                cvss_rating="Critical" if number % 2 else "Medium", published=published),))
    sites = [site for site in summary.sites if site.status == "online"]
    summary.exposure = [VulnerableInstall(
        site_id=site.site_id, site_url=site.site_url, site_name=site.site_name, client=site.client, type="plugin",
        slug="wordfence", name="Wordfence Security", version="7.11.7",
        vulnerabilities=[Vulnerability(id=f"x{n}", cve=f"CVE-2026-{20000 + n}", cvss_score=5.3, cvss_rating="Medium",
                                       published=(night - timedelta(days=12 + n)).strftime("%Y-%m-%d %H:%M:%S"))])
        for n, site in zip(range(exposed), [sites[n % len(sites)] for n in range(exposed)], strict=True)]
    summary.vulnerability_feed = FeedStatus(source="https://www.wordfence.com/api/intelligence/v3/vulnerabilities/"
                                            "production", fetched_at=(night - timedelta(hours=3)).isoformat(),
                                            records=38_928)
    summary.exposure_stats = VulnerabilityStats(
        open=exposed + 4, open_sites=len(sites), open_fixable=4, no_fix=exposed, no_fix_median_days=26.0,
        no_fix_oldest_days=41.0, patched=12, since_published=Wait.of([9.0, 30.0, 50.0, 80.0, 200.0]),
        since_fix=Wait.of([0.0, 2.0, 24.0, 30.0]), since_offered=Wait.of([0.0, 0.0, 1.0]))
    summary.write(run_dir)
    return summary


LONG_CLIENT = "Harbor Group"
LONG_SITES = 160  # more than any list of a report showed before it was whole (100 updated items, 50 sites to check)


def write_long_lists(summary: Summary, run_dir: Path) -> Summary:
    """The night with `LONG_SITES` more sites, all of client `LONG_CLIENT`, and every list of a report longer than
    the rows it shows in full, each row named uniquely (so that a test finds every one): an update on every site
    (160 updated), a failure of its own on each (160 rows of failed), 60 sites failing their check, 25 of them
    broken by the night, 35 sites deferred by one blackout, 55 already down, 25 back in maintenance, 20 plugin
    versions that failed, and 55 sites whose look is for review (their screenshots missing)."""
    first = max(site.site_id for site in summary.sites) + 1
    night = summary.started_at
    for n in range(1, LONG_SITES + 1):
        name, url = f"Harbor Site {n:03d}", f"https://harbor-{n:03d}.example"
        site = SiteReport(site_id=first + n, site_url=url, site_name=name, client=LONG_CLIENT,
                          check=HealthCheck(online=True, http_code=200, response_ms=300.0, probe_ok=True))
        if n <= 60:
            site.check = HealthCheck(online=True, http_code=500, response_ms=900.0, probe_ok=False,
                                     probe_error=f"HTTP 500 on the home page of {name}")
        if n <= 25:
            summary.broken.append(SiteAlarm(site_id=site.site_id, site_url=url, site_name=name, client=LONG_CLIENT,
                                            saw=f"{name} broke: HTTP 500", suspects=[Suspect(
                                                type=UpdateType.plugin, slug="harbor-forms", name="Harbor Forms",
                                                from_version="1.0", to_version="1.1")]))
        elif 60 < n <= 95:
            site.deferred, site.opens_at = "blackout: harbor launch week", night + timedelta(days=3)
        elif 95 < n <= 150:
            summary.already_down.append(SiteAlarm(site_id=site.site_id, site_url=url, site_name=name,
                                                  client=LONG_CLIENT, saw=f"connection refused by {name}"))
        if 100 < n <= 125:
            site.revived = True
        summary.sites.append(site)
        summary.items += [
            Item(site_id=site.site_id, site_url=url, site_name=name, client=LONG_CLIENT, type=UpdateType.plugin,
                 slug="harbor-forms", name="Harbor Forms", from_version="1.0", to_version="1.1",
                 outcome=Outcome.updated),
            Item(site_id=site.site_id, site_url=url, site_name=name, client=LONG_CLIENT, type=UpdateType.plugin,
                 slug=f"harbor-widget-{n % 20}", name=f"Harbor Widget {n % 20}", from_version="2.0",
                 to_version="2.1", outcome=Outcome.failed, reason=f"Download failed on {name}"),
        ]
        if 60 < n <= 115:
            summary.looks.append(SiteLook(
                site_id=site.site_id, site_url=url, site_name=name, client=LONG_CLIENT, step=UpdateType.plugin,
                band=Band.review, pages=[PageLook(page="home", viewport="desktop", url=url, band=Band.review,
                                                  score=0.01 + n / 10_000)]))
    summary.clients.append(ReportClient(name=LONG_CLIENT, email="it@harbor.example"))
    summary.counts = Summary.count(summary.items)
    summary.write(run_dir)
    return summary


BROKEN_LOOK = "shop.northwindbakery.co.uk"  # the night blanked its main section
REVIEW_LOOK = "acmedental.com"  # a button changed colour: for review
WIDTHS = {"desktop": 1280, "mobile": 390}
PASS, FAIL = 0.005, 0.05


def page_image(domain: str, viewport: str, *, blank: bool = False, restyled: bool = False) -> Image.Image:
    """A plausible web page in the site's colour: header, hero, cards, text, footer. `blank`: the main section
    renders empty (a bad page-builder release); `restyled`: its call-to-action button changed."""
    width = WIDTHS[viewport]
    height = 2400 if viewport == "desktop" else 1800
    rng = random.Random(domain)
    hue = tuple(rng.randint(30, 160) for _ in range(3))
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    margin = width // 16
    draw.rectangle((0, 0, width, 72), fill=hue)
    draw.rectangle((margin, 24, margin + 160, 48), fill="white")
    if viewport == "desktop":
        for n in range(4):
            draw.rectangle((width - margin - (n + 1) * 110, 30, width - margin - n * 110 - 30, 42), fill="#e4e7eb")
    if not blank:
        light = tuple(min(255, c + 90) for c in hue)
        draw.rectangle((0, 72, width, 620), fill=light)
        draw.rectangle((margin, 200, width * 2 // 3, 250), fill="#7b2d26" if restyled else "#102a43")
        draw.rectangle((margin, 280, width // 2, 300), fill="#52606d")
        button = (214, 69, 69) if restyled else (31, 157, 85)
        draw.rectangle((margin, 360, margin + 220, 420), fill=button)
        columns = 3 if viewport == "desktop" else 1
        card = (width - 2 * margin - (columns - 1) * 24) // columns
        for row in range(2 if viewport == "desktop" else 3):
            for column in range(columns):
                x, y = margin + column * (card + 24), 680 + row * 340
                draw.rectangle((x, y, x + card, y + 300), outline="#d9e2ec", width=2)
                draw.rectangle((x + 2, y + 2, x + card - 2, y + 150), fill=tuple(min(255, c + 40) for c in hue))
                for line in range(4):
                    draw.rectangle((x + 16, y + 170 + line * 28, x + card - 16 - line * 30, y + 184 + line * 28),
                                   fill="#9aa5b1")
        for line in range(12):
            y = 1750 + line * 28 if viewport == "desktop" else 1720 - (12 - line) * 28
            draw.rectangle((margin, y, width - margin - (line % 3) * 60, y + 12), fill="#bcccdc")
    draw.rectangle((0, height - 160, width, height), fill="#1f2933")
    return image


def diff_picture(before: Image.Image, after: Image.Image) -> tuple[Image.Image, float]:
    """The after shot faded with its changes in red, as the night draws it, and the share of pixels changed."""
    a, b = np.asarray(before, dtype=np.int16), np.asarray(after, dtype=np.int16)
    changed = (np.abs(a - b) > 24).any(axis=2)
    faded = (b.mean(axis=2, keepdims=True) * 0.35 + 255 * 0.65).repeat(3, axis=2)
    faded[changed] = (230, 20, 20)
    return Image.fromarray(faded.astype(np.uint8), "RGB"), float(changed.mean())


@functools.cache
def look_pictures(domain: str, viewport: str, *, blank: bool, restyled: bool
                  ) -> tuple[tuple[tuple[str, bytes], ...], float]:
    """A page's before, after and diff pictures as PNG files, and its score: drawn once per test process (every
    report test's night has the same sites)."""
    before = page_image(domain, viewport)
    after = page_image(domain, viewport, blank=blank, restyled=restyled)
    diff, score = diff_picture(before, after)
    pictures = []
    for label, image in (("before", before), ("after", after), ("diff", diff)):
        png = io.BytesIO()
        image.save(png, "PNG", compress_level=1)
        pictures.append((label, png.getvalue()))
    return tuple(pictures), score


def write_looks(summary: Summary, run_dir: Path, *, page_name: str = "checkout") -> Summary:
    """Screenshots of every online site of the night (the home page at both viewports), written under
    RUN_DIR/visual/ as the night writes them, and `summary.looks`: one broken site (with its alarm), one for
    review, the rest as before. `page_name` names the broken site's second page (a test makes it hostile)."""
    looks = []
    for site in summary.sites:
        if site.status != "online":
            continue
        domain = site.site_url.removeprefix("https://")
        pages = [("home", "desktop"), ("home", "mobile")] + ([(page_name, "desktop")] if domain == BROKEN_LOOK else [])
        views = []
        for page, viewport in pages:
            folder = f"visual/{domain}/{viewport}"
            pictures, score = look_pictures(domain, viewport, blank=domain == BROKEN_LOOK,
                                            restyled=domain in (REVIEW_LOOK, BROKEN_LOOK) and viewport == "desktop")
            stem = "".join(c if c.isalnum() else "_" for c in page)
            paths = {label: f"{folder}/{stem}.{label}.png" for label, _ in pictures}
            (run_dir / folder).mkdir(parents=True, exist_ok=True)
            for label, png in pictures:
                (run_dir / paths[label]).write_bytes(png)
            band = Band.healthy if score < PASS else Band.review if score <= FAIL else Band.broken
            views.append(PageLook(page=page, viewport=viewport, url=f"{site.site_url}/{'' if page == 'home' else page}",
                                  band=band, score=round(score, 4), **paths,
                                  new_console_errors=["Uncaught TypeError: elementorFrontend is undefined"]
                                  if band is Band.broken else []))  # fmt: skip
        look = SiteLook(site_id=site.site_id, site_url=site.site_url, site_name=site.site_name, client=site.client,
                        step=UpdateType.plugin, pages=views)  # fmt: skip
        look.band = look.worst.band
        looks.append(look)
        if look.band is Band.broken:
            summary.broken.append(SiteAlarm(
                site_id=site.site_id, site_url=site.site_url, site_name=site.site_name, client=site.client,
                saw=look.headline, dashboard_page="https://dashboard.agency.example/wp-admin/admin.php?page=managesites",
                suspects=[Suspect(type=UpdateType.plugin, slug="elementor", name="Elementor", from_version="3.24.7",
                                  to_version="3.25.4")]))  # fmt: skip
    summary.looks = looks
    summary.write(run_dir)
    return summary


if __name__ == "__main__":
    runs = write_nights(Path(sys.argv[1]), xss_probe=False)
    if "--dry-run" in sys.argv[2:]:
        runs.insert(-1, write_dry_run(Path(sys.argv[1]), Summary.read(runs[-1]).started_at.date()))
    if "--looks" in sys.argv[2:]:
        write_looks(Summary.read(runs[-1]), runs[-1])
    if "--security" in sys.argv[2:]:
        write_security(Summary.read(runs[-1]), runs[-1])
    for path in runs:
        print(path)
