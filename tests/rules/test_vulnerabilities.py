"""Matching versions against the feed's ranges as WordPress compares them (test_wordpress_version.py), and the
classification of pending items."""

from __future__ import annotations

import pytest

from fleet.model.vulnerability import (
    AffectedRange,
    FeedRange,
    OddRecord,
    Vulnerability,
    VulnerabilityClass,
    parse_record,
)
from fleet.rules.vulnerabilities import classify, feed_key, in_range


def bounds(low: str, high: str, low_in: bool = True, high_in: bool = True) -> AffectedRange:
    return AffectedRange(from_version=low, from_inclusive=low_in, to_version=high, to_inclusive=high_in)


@pytest.mark.parametrize(("version", "affected", "inside"), [
    ("5.0", bounds("*", "5.0"), True),
    ("5.0", bounds("*", "5.0", high_in=False), False),
    ("5.0-beta", bounds("*", "5.0", high_in=False), True),
    ("4.9", bounds("5.0", "*"), False),
    ("5.0", bounds("5.0", "*", low_in=False), False),
    ("99.0", bounds("5.0", "*"), True),
    ("1.2.3", bounds("*", "*"), True),
    ("1.10", bounds("1.2", "1.9"), False),  # not a string comparison
])
def test_ranges_with_wildcards_and_open_ends(version: str, affected: AffectedRange, inside: bool) -> None:
    assert in_range(version, affected) is inside


def affected(vuln_id: str, low: str, high: str, high_in: bool = True) -> FeedRange:
    vulnerability = Vulnerability(id=vuln_id, cve=f"CVE-2026-{vuln_id}", cvss_score=8.1, cvss_rating="High")
    return FeedRange(vulnerability, low, True, high, high_in)


FEED = {("plugin", "forms"): [affected("1", "*", "2.0", high_in=False), affected("2", "*", "3.0"),
                              affected("2", "4.0-beta", "4.0.2")]}


@pytest.mark.parametrize(("installed", "offered", "security", "fixes", "left_open"), [
    ("1.5", "2.0", VulnerabilityClass.fixes, ["1"], ["2"]),
    ("1.5", "3.1", VulnerabilityClass.fixes, ["1", "2"], []),
    ("2.5", "2.9", VulnerabilityClass.no_fix, [], ["2"]),
    ("2.5", None, VulnerabilityClass.no_fix, [], ["2"]),  # installed, nothing offered: a vulnerable install
    ("3.1", "3.2", VulnerabilityClass.routine, [], []),
    ("3.1", "4.0.1", VulnerabilityClass.routine, [], []),  # an update into a vulnerable release: said in `open` of none
    ("4.0-RC1", "4.1", VulnerabilityClass.fixes, ["2"], []),  # a pre-release inside a range given by its second range
])
def test_a_pending_item_is_classed(installed: str, offered: str | None, security: VulnerabilityClass, fixes: list[str],
                                   left_open: list[str]) -> None:
    found = classify("plugin", "forms/forms.php", installed, offered, FEED)
    assert found.security is security
    assert [v.id for v in found.fixes] == fixes and [v.id for v in found.open] == left_open


def test_what_cannot_be_matched_is_unchecked_never_clean() -> None:
    assert classify("plugin", "forms/forms.php", "1.5", "2.0", None).security is VulnerabilityClass.unchecked
    assert classify("plugin", "forms/forms.php", None, "2.0", FEED).security is VulnerabilityClass.unchecked
    assert classify("translation", "forms", "1.5", "1.5", FEED).security is VulnerabilityClass.routine


def test_feed_keys() -> None:
    assert feed_key("plugin", "Akismet/akismet.php") == ("plugin", "akismet")
    assert feed_key("plugin", "hello.php") == ("plugin", "hello")
    assert feed_key("core", "core") == ("core", "wordpress")
    assert feed_key("translation", "akismet") is None


def test_an_odd_record_is_named() -> None:
    with pytest.raises(OddRecord, match=r"feed record abc: software\[0\]\.type 'widget'"):
        parse_record("abc", {"id": "abc", "software": [{"type": "widget", "slug": "x", "affected_versions": {}}]})
    with pytest.raises(OddRecord, match="cvss.score"):
        parse_record("abc", {"id": "abc", "cvss": {"score": "high"}, "software": []})
    entries = parse_record("k", {"id": "k", "software": [{"type": "plugin", "slug": "Forms", "affected_versions": {
        "* - 2": {"from_version": "*", "to_version": "2", "to_inclusive": False}}}], "cvss": None})
    assert entries[0].slug == "forms" and entries[0].ranges == [bounds("*", "2", high_in=False)]
