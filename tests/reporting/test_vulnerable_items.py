"""One sorting of the vulnerable items for every view (issue 47): fixed, not installed (still vulnerable), open (no
fix offered), from a built summary without Prefect; and `fleet vulnerabilities show` and the report list the same
items in the same three groups."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import DRY_RUN_RULE, Item, Outcome, Summary, UpdateType
from fleet.model.vulnerability import (
    FeedStatus,
    ItemVulnerabilities,
    Vulnerability,
    VulnerabilityClass,
    VulnerableInstall,
)
from reporting.rows import read_summary
from reporting.vulnerability_section import vulnerability_rows, vulnerability_section
from reporting.vulnerable_items import VulnerableItem, vulnerable_items

NOW = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
CRITICAL = Vulnerability(id="w1", cve="CVE-2026-1111", cvss_score=9.8, cvss_rating="Critical",
                         published="2026-11-26 17:00:00")  # 9 h before the night ended
MEDIUM = Vulnerability(id="w2", cve="CVE-2026-2222", cvss_score=5.4, cvss_rating="Medium",
                       published="2026-11-15T02:00:00Z")  # 12 days before
UNDATED = Vulnerability(id="w3", title="<script>alert(1)</script>")
ACME, BIRCH = "Acme Dental", "Birch & Co"


def item(site: int, client: str | None, name: str, outcome: Outcome, security: ItemVulnerabilities | None, *,
         reason: str | None = None, rule: str | None = None, to_version: str | None = "1.1") -> Item:
    return Item(site_id=site, site_url=f"https://site{site}.example/", site_name=f"Site {site}", client=client,
                type=UpdateType.plugin, slug=name.lower(), name=name, from_version="1.0", to_version=to_version,
                outcome=outcome, reason=reason, rule=rule, security=security)


def night(*, dry_run: bool = False) -> Summary:
    """Every case: a fix installed, one held, one installed that leaves another open, one skipped that leaves one
    open, an update that fixes nothing (its version not known), an installed item with no update, a routine and an
    unchecked item."""
    would_apply = {"outcome": Outcome.excluded, "rule": DRY_RUN_RULE, "reason": "dry run: would update 1.0 -> 1.1"}
    installed = would_apply if dry_run else {"outcome": Outcome.updated}
    return Summary(
        run_id="r1", started_at=NOW, finished_at=NOW, dry_run=dry_run, dashboard="https://dash.example/wp-json",
        items=[
            item(1, ACME, "Shop", **installed,
                 security=ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(CRITICAL,))),
            item(1, ACME, "Forms", Outcome.held, ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(CRITICAL,)),
                 reason="held: the agency checks it first"),
            item(2, BIRCH, "Gallery", **installed,
                 security=ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(CRITICAL,), open=(MEDIUM,))),
            item(2, BIRCH, "Slider", Outcome.skipped,
                 ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(MEDIUM,), open=(UNDATED,)),
                 reason="site is suspended"),
            item(2, BIRCH, "Cache", Outcome.delayed, ItemVulnerabilities(VulnerabilityClass.no_fix, open=(MEDIUM,)),
                 to_version=None),
            item(1, ACME, "Seo", Outcome.updated, ItemVulnerabilities(VulnerabilityClass.routine)),
            item(3, None, "Backup", Outcome.delayed,
                 ItemVulnerabilities(VulnerabilityClass.unchecked, why_unchecked="no feed")),
            item(1, ACME, "Captions", Outcome.updated, None),
        ],
        exposure=[VulnerableInstall(site_id=3, site_url="https://site3.example/", site_name="Site 3", type="theme",
                           slug="astra", name="Astra", version="4.8.3", vulnerabilities=[MEDIUM, UNDATED])],
        vulnerability_feed=FeedStatus(source="feed.json", fetched_at=NOW.isoformat(), records=3))


def said(entries: list[VulnerableItem]) -> list[tuple[str, str, str, str]]:
    return [(entry.site_name, entry.name, entry.version, entry.labels) for entry in entries]


def test_the_three_lists_of_a_built_summary() -> None:
    summary = night()
    found = vulnerable_items(summary, summary.items)
    assert said(found.fixed) == [("Site 1", "Shop", "1.0 → 1.1", "CVE-2026-1111 9.8 Critical"),
                                 ("Site 2", "Gallery", "1.0 → 1.1", "CVE-2026-1111 9.8 Critical")]
    assert said(found.not_installed) == [("Site 1", "Forms", "1.0 → 1.1", "CVE-2026-1111 9.8 Critical"),
                                         ("Site 2", "Slider", "1.0 → 1.1", "CVE-2026-2222 5.4 Medium")]
    assert said(found.open) == [  # what a fix leaves open stays open whatever became of the fix
        ("Site 2", "Gallery", "1.0 → 1.1", "CVE-2026-2222 5.4 Medium"),
        ("Site 2", "Slider", "1.0 → 1.1", "w3"),
        ("Site 2", "Cache", "1.0 → ?", "CVE-2026-2222 5.4 Medium"),
        ("Site 3", "Astra", "4.8.3", "CVE-2026-2222 5.4 Medium; w3")]
    assert found.unchecked == 1
    shop, gallery = found.fixed
    assert (shop.word, shop.fate, shop.installed, shop.public_hours) == ("installed", "installed", True, 9.0)
    assert (shop.site_url, shop.client, shop.type, shop.outcome) == ("https://site1.example/", ACME, "plugin",
                                                                     Outcome.updated)
    forms, slider = found.not_installed
    assert (forms.word, forms.fate, forms.installed) == ("held", "held: the agency checks it first", False)
    assert (slider.outcome, slider.fate, slider.public_hours) == (Outcome.skipped, "skipped: site is suspended",
                                                                  12 * 24.0)
    left_open, undated, cache, astra = found.open
    assert (left_open.outcome, left_open.word, left_open.installed) == (Outcome.updated, "", False)
    assert undated.public_hours is None and astra.public_hours == 12 * 24.0
    assert (astra.outcome, astra.type, astra.client, astra.fate) == (None, "theme", None, "")


def test_a_client_reads_its_own_sites_only() -> None:
    summary = night()
    acme = vulnerable_items(summary, summary.items, client=ACME)
    assert [entry.name for entry in acme.fixed + acme.not_installed + acme.open] == ["Shop", "Forms"]
    birch = vulnerable_items(summary, summary.items, client=BIRCH)
    assert [[entry.name for entry in group] for group in (birch.fixed, birch.not_installed, birch.open)] == [
        ["Gallery"], ["Slider"], ["Gallery", "Slider", "Cache"]]
    assert acme.unchecked == birch.unchecked == 0  # the unchecked item is of no client's


def test_a_dry_runs_fix_it_would_apply_would_be_installed_not_excluded() -> None:
    """A dry run reports its would-apply items `excluded` (rule dry_run): their fixes would be installed, never
    "not installed while vulnerable (excluded)"; and an advisory is as old as it is, since nothing went in."""
    summary = night(dry_run=True)
    found = vulnerable_items(summary, summary.items)
    assert [(entry.name, entry.fate, entry.installed) for entry in found.fixed] == [
        ("Shop", "would be installed", False), ("Gallery", "would be installed", False)]
    assert [entry.name for entry in found.not_installed] == ["Forms", "Slider"]
    section = vulnerability_section(summary, vulnerability_rows(summary.items))
    assert section is not None
    assert section.sentence.startswith("2 security fixes would be installed; 2 not installed while vulnerable "
                                       "(held 1; skipped 1); 4 items with a known vulnerability and no fix yet")
    assert section.fixed[0].age == "public for 9 h" and "excluded" not in section.alarm


def test_the_report_says_a_fix_that_leaves_one_open_keeps_the_site_vulnerable() -> None:
    summary = night()
    section = vulnerability_section(summary, vulnerability_rows(summary.items), tidy=lambda value, _: f"[{value}]")
    assert section is not None
    assert [(row.item, row.version, row.vulnerabilities, row.state, row.age) for row in section.open] == [
        ("[Gallery]", "[1.0 → 1.1]", "[CVE-2026-2222 5.4 Medium]", "[]", "[public for 12 days]"),
        ("[Slider]", "[1.0 → 1.1]", "[w3]", "[]", "[]"),
        ("[Cache]", "[1.0 → ?]", "[CVE-2026-2222 5.4 Medium]", "[]", "[public for 12 days]"),
        ("[Astra]", "[4.8.3]", "[CVE-2026-2222 5.4 Medium; w3]", "[]", "[public for 12 days]")]  # each value tidied
    assert section.fixed[0].age == "[installed 9 h after its advisory]"
    assert section.not_installed[0].state == "[held: the agency checks it first]"
    assert section.sentence == ("2 security fixes installed; 2 not installed while vulnerable (held 1; skipped 1); "
                                "4 items with a known vulnerability and no fix yet; 1 item unchecked (never read as "
                                "clean).")
    birch = vulnerability_section(summary, vulnerability_rows(summary.items), client=BIRCH)
    assert birch is not None and [row.item for row in birch.open] == ["Gallery", "Slider", "Cache"]
    assert birch.plain[-1].startswith("3 known security issues have no fix yet")


def cli_groups(output: str) -> dict[str, set[tuple[str, str, str, str]]]:
    """`fleet vulnerabilities show`'s lines by site (up to its count of sites), each in the group its words name."""
    groups: dict[str, set[tuple[str, str, str, str]]] = {"fixed": set(), "not_installed": set(), "open": set()}
    site = ""
    for line in output.splitlines():
        if re.match(r"\d+ sites? with a known vulnerability", line):
            break
        if not line.startswith("    "):
            site = line.split(" (", 1)[0]
            continue
        name, version, what, labels = re.fullmatch(
            r"    \w+ (\S+) (.+?): (fix [a-z ]+?|no fix offered)(?: \([^)]*\))?: (.*)", line).groups()
        group = ("open" if what == "no fix offered" else
                 "fixed" if what in ("fix installed", "fix would be installed") else "not_installed")
        groups[group].add((site, name, version, labels))
    return groups


def test_the_command_line_and_the_report_list_the_same_items_in_the_same_groups(tmp_path: Path) -> None:
    """Each view renders the one sorting: were either to sort on its own again (a fix's open vulnerabilities left
    out, a dry run's fixes read as excluded), its groups would differ from the other's."""
    for dry_run in (False, True):
        run_dir = tmp_path / f"run-{dry_run}"
        night(dry_run=dry_run).write(run_dir)
        shown = CliRunner().invoke(app, ["vulnerabilities", "show", "--run", str(run_dir)])
        assert shown.exit_code == 0, shown.output
        summary = read_summary(run_dir)  # as the report run reads it
        section = vulnerability_section(summary, vulnerability_rows(summary.items))
        assert section is not None
        reported = {group: {(row.site, row.item, row.version, row.vulnerabilities) for row in getattr(section, group)}
                    for group in ("fixed", "not_installed", "open")}
        assert cli_groups(shown.output) == reported, (dry_run, shown.output)
        assert [len(reported[group]) for group in ("fixed", "not_installed", "open")] == [2, 2, 4], dry_run
