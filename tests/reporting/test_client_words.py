"""A client's report holds nothing internal: a night where the client's sites saw every outcome (and every way an
item is held back), a broken site, a site already down, a site that came back, a site outside its maintenance
times, raw errors and the fleet's failure rates, rendered three ways; no internal word appears in any, and every
item not done says what happens next."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

from fleet.model.summary import (
    Containment,
    ContainmentStatus,
    HealthCheck,
    Item,
    NightHold,
    Outcome,
    SiteAlarm,
    Summary,
    Suspect,
    UpdateType,
)
from fleet.rules.policy import Rule
from reporting.run_report import render_reports
from tests.reporting.builder import build_summary
from tests.reporting.conftest import body

CLIENT = "Acme Dental"
NIGHT = date(2026, 11, 21)
# Words (patterns) of the operator's trade, the dashboard's and the policy file's: a client reads none of them.
INTERNAL_WORDS = [
    "rule", "run", "summary.json", "unchanged", "no answer", "ignored", "excluded", "skipped", "deferred", "failed \\d",
    "failure rate", "plugin versions", "semver", "min_age", "allow_list", "night_hold", "site_status",
    "ignore list", "cohort", "rollout", "dry run", "dry_run", "dashboard", "known offline", "probe", "blackout",
    "suspect", "fleet holds", "approval gate", "not approved", "held since", "timeout", "error", "fatal",
    "curl", "mainwp_", "http 500", "incident count", "operator",
]  # fmt: skip
INTERNAL_MARKS = ["%", "HTTP", "PHP"]  # case matters: codes and rates
WHAT_HAPPENS_NEXT = re.compile(r"next night|next release|once|when|until|wait|looking into|due|come round")


class Visible(HTMLParser):
    """The text a reader sees in the HTML: no tags, attributes, styles or hidden preheader."""

    def __init__(self, document: str) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0
        self.feed(document)

    def handle_starttag(self, tag, attrs):
        if tag in ("style", "title") or ("class", "preheader") in attrs:
            self._hidden += 1

    def handle_endtag(self, tag):
        if tag in ("style", "title") or (tag == "div" and self._hidden):
            self._hidden = max(0, self._hidden - 1)

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def a_night_of_every_outcome(run_dir: Path) -> Summary:
    """The sample night, with the client's sites given every outcome and every reason a version is held back."""
    for back in (2, 1):  # earlier nights: trends, and the fleet's failure rates per plugin
        build_summary(NIGHT - timedelta(days=back), xss_probe=False).write(run_dir.parent / f"night-{back}")
    summary = build_summary(NIGHT, xss_probe=False)
    sites = {site.site_name: site for site in summary.sites}
    dental, booking, kids = sites["Acme Dental"], sites["Acme Dental Booking"], sites["Acme Kids Dentistry"]

    def item(site, slug: str, outcome: Outcome, reason: str | None = None, rule: str | None = None,
             until: date | None = None) -> Item:
        return Item(site_id=site.site_id, site_url=site.site_url, site_name=site.site_name, client=CLIENT,
                    type=UpdateType.plugin, slug=slug, name=slug.replace("-", " ").title(), from_version="1.0",
                    to_version="1.1", outcome=outcome, reason=reason, rule=rule, until=until)

    summary.items = [i for i in summary.items if i.client != CLIENT] + [
        item(dental, "forms", Outcome.updated),
        item(dental, "cache", Outcome.failed, "Download failed. cURL error 28 [mainwp_update_failed]"),
        item(dental, "gallery", Outcome.unknown, "HTTP 504: Gateway Time-out; the job did not finish (timeout)"),
        item(dental, "seo", Outcome.unchanged, "reported success, installed version still 1.0"),
        item(dental, "shop", Outcome.held, "held: the client's Black Friday sale (pinned < 2.0)", Rule.hold,
             NIGHT + timedelta(days=9)),
        item(dental, "slider", Outcome.held, "held since 2026-11-20: failed on 3 sites: PHP Fatal error "
             "(release: fleet holds release plugin:slider@1.1)", Rule.night_hold),
        item(dental, "backup", Outcome.held, "held: WordPress rolled version 1.1 back on 2 site(s), this one "
             "included, as the dashboard remembers", Rule.rolled_back),
        item(dental, "popup", Outcome.held, "held: WordPress rolled version 1.1 back on 1 site(s), as the dashboard "
             "remembers", Rule.rolled_back_elsewhere),
        item(dental, "editor", Outcome.held, "Elementor 3.25 broke Northwind Shop tonight: held", "broken_tonight"),
        item(dental, "security", Outcome.held, "not approved by ops@agency.example (major version)", Rule.approval),
        item(dental, "maps", Outcome.delayed, "first seen 2026-11-20 (1 of 3 days)", Rule.min_age,
             NIGHT + timedelta(days=2)),
        item(dental, "hello", Outcome.ignored, "on the dashboard's global ignore list", Rule.ignore_list),
        item(dental, "akismet", Outcome.excluded, "semver: major update 1.0 -> 2.0, policy allows minor", Rule.semver),
        item(booking, "forms", Outcome.skipped, "sync failed: ERROR: cURL error 7 [mainwp_sync_failed]",
             Rule.site_status),
        item(kids, "forms", Outcome.deferred, "blackout: launch week; next window opens Fri 27 Nov 2026 00:00 UTC",
             Rule.blackout),
    ]
    booking.status = "disconnected"
    kids.deferred, kids.opens_at = "blackout: launch week", datetime(2026, 11, 27, tzinfo=UTC)
    dental.revived = True
    dental.check = HealthCheck(online=True, http_code=500, probe_ok=False, open_incidents=2,
                               probe_error="HTTP 500: PHP Fatal error in wp-content/plugins/forms/forms.php")
    broken = Suspect(type=UpdateType.plugin, slug="forms", name="Forms", from_version="1.0", to_version="1.1")
    summary.broken = [SiteAlarm(
        site_id=dental.site_id, site_url=dental.site_url, site_name=dental.site_name, client=CLIENT,
        saw="HTTP 500: PHP Fatal error", dashboard_page="https://dashboard.agency.example/wp-admin/?site=1",
        suspects=[broken], containment=Containment(
            step=UpdateType.plugin, saw="HTTP 500", status=ContainmentStatus.contained, culprit=broken, rounds=2,
            detail="deactivated forms", next_steps="fleet holds release plugin:forms@1.1 once fixed"))]
    summary.already_down = [SiteAlarm(site_id=booking.site_id, site_url=booking.site_url, site_name=booking.site_name,
                                      client=CLIENT, saw="cURL error 7: connection refused")]
    summary.holds = [NightHold(type=UpdateType.plugin, slug="slider", name="Slider", version="1.1",
                               reason="failed on 3 sites: PHP Fatal error", site="https://shop.northwindbakery.co.uk",
                               since=NIGHT - timedelta(days=1))]
    summary.counts = Summary.count(summary.items)
    summary.write(run_dir)
    return summary


def test_a_clients_report_holds_no_internal_word_and_says_what_happens_next(tmp_path: Path):
    summary = a_night_of_every_outcome(tmp_path / "night-0")
    rendered = render_reports(tmp_path / "night-0")
    client = next(report for report in rendered.reports if report.name == CLIENT)
    operator = body(rendered, rendered.operator, ".txt")
    assert "Plugin versions that failed" in operator and "failure rate per plugin" in operator.lower()
    assert {"Failed", "No answer", "Unchanged", "Skipped", "Deferred"} <= set(re.findall(r"^(\w[\w ]*) \(\d+\): ",
                                                                                         operator, re.M))
    assert summary.run_id in operator  # the same night, told to the operator with everything

    shown = {".txt": body(rendered, client, ".txt"), ".md": body(rendered, client, ".md").replace("\\", ""),
             ".html": Visible(body(rendered, client, ".html")).text}
    assert client.charts == ("outcomes-per-night",)  # no failure rate per plugin over other clients' sites
    for suffix, text in shown.items():
        assert "Acme Dental Booking" in text and "Not installed yet" in text, suffix  # the report is whole
        lower = text.lower()
        found = [word for word in INTERNAL_WORDS if re.search(rf"\b{word}", lower)]
        found += [mark for mark in INTERNAL_MARKS if mark in text]
        assert not found, f"{suffix}: {found}"
        assert summary.run_id not in text, suffix

    text = shown[".txt"]
    section = text.split("Not updated, and why (", 1)[1].split("\n\nLeft out on purpose", 1)[0]
    rows = re.findall(r"^  - (.+)\n      (.+)$", section, re.M)
    assert len(rows) == 12, rows  # every item not done but the two left out on purpose, each with its next step
    for item, why in rows:
        assert WHAT_HAPPENS_NEXT.search(why), (item, why)
    assert "Left out on purpose 2 (on 1 site)" in text
