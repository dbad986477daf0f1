"""Which vulnerabilities affect a version, and what a pending update means for them.

Versions compare as WordPress compares them (`fleet.model.wordpress_version`, PHP's `version_compare`). `*` at
either end of a feed's range leaves it open.
"""

from __future__ import annotations

from collections.abc import Mapping

from fleet.model.vulnerability import (
    WILDCARD,
    AffectedRange,
    FeedRange,
    ItemVulnerabilities,
    Vulnerability,
    VulnerabilityClass,
)
from fleet.model.wordpress_version import plain_numbers, version_compare

FEED_TYPES = {"plugin": "plugin", "theme": "theme", "core": "core"}  # the dashboard's update types the feed covers


# A range with its ends read once: (id, vulnerability, low, low's numbers, low inclusive, high, high's numbers,
# high inclusive); an end is None for `*`, its numbers None unless it is a plain version (digits and dots).
_Compiled = tuple[str, "Vulnerability | None", "str | None", "tuple[int, ...] | None", bool, "str | None",
                  "tuple[int, ...] | None", bool]


def _compile(vulnerability: Vulnerability | None, bounds: AffectedRange | FeedRange) -> _Compiled:
    low = None if bounds.from_version == WILDCARD else bounds.from_version
    high = None if bounds.to_version == WILDCARD else bounds.to_version
    return (vulnerability.id if vulnerability else "", vulnerability, low, plain_numbers(low) if low else None,
            bounds.from_inclusive, high, plain_numbers(high) if high else None, bounds.to_inclusive)


def _affected_by(version: str, ranges: list[_Compiled]) -> list[Vulnerability | None]:
    """The vulnerabilities with a range that holds `version`, each once, in the feed's order. Plain versions on
    both sides compare as tuples of numbers (what PHP's rules give them); the rest through `version_compare`.
    Written flat: a fleet's matching spends its time here."""
    numbers = plain_numbers(version)
    seen: dict[str, Vulnerability | None] = {}
    for vuln_id, vulnerability, low, low_numbers, low_inclusive, high, high_numbers, high_inclusive in ranges:
        if vuln_id in seen:
            continue
        if low is not None:
            if numbers is not None and low_numbers is not None:
                if numbers < low_numbers if low_inclusive else numbers <= low_numbers:
                    continue
            else:
                order = version_compare(version, low)
                if order < 0 or (order == 0 and not low_inclusive):
                    continue
        if high is not None:
            if numbers is not None and high_numbers is not None:
                if numbers > high_numbers if high_inclusive else numbers >= high_numbers:
                    continue
            else:
                order = version_compare(version, high)
                if order > 0 or (order == 0 and not high_inclusive):
                    continue
        seen[vuln_id] = vulnerability
    return list(seen.values())


def in_range(version: str, bounds: AffectedRange) -> bool:
    """The version lies in the range (`*` opens an end; each end inclusive or not)."""
    return bool(_affected_by(version, [_compile(None, bounds)]))


def feed_key(type_: str, slug: str) -> tuple[str, str] | None:
    """The (type, slug) the feed knows an item by; None for what it never covers (translations). A plugin is known
    by its directory (`akismet/akismet.php` -> `akismet`); WordPress core is `wordpress` whatever its slug here."""
    feed_type = FEED_TYPES.get(type_)
    if feed_type is None:
        return None
    if feed_type == "core":
        return feed_type, "wordpress"
    return feed_type, slug.split("/")[0].removesuffix(".php").lower()


_ROUTINE = ItemVulnerabilities(security=VulnerabilityClass.routine)
_NO_FEED = ItemVulnerabilities(security=VulnerabilityClass.unchecked,
                               why_unchecked="no copy of the vulnerability feed")
_NO_VERSION = ItemVulnerabilities(security=VulnerabilityClass.unchecked,
                                  why_unchecked="the installed version is not known")


class FleetMatch:
    """The feed's entries for a fleet's (type, slug) pairs (None: no copy of the feed), matched once per version.

    A fleet runs few versions of each item: each (item, version) is compared with the feed's ranges once, and each
    (item, installed, offered) classed once, whatever the number of sites (the answers are frozen, so shared).
    """

    def __init__(self, feed: Mapping[tuple[str, str], list[FeedRange]] | None) -> None:
        self.feed = feed
        self._compiled: dict[tuple[str, str], list[_Compiled]] = {}
        self._affecting: dict[tuple[tuple[str, str], str], list[Vulnerability]] = {}
        self._classes: dict[tuple[str, str, str | None, str | None], ItemVulnerabilities] = {}

    def affecting(self, key: tuple[str, str], version: str) -> list[Vulnerability]:
        found = self._affecting.get((key, version))
        if found is None:
            ranges = self._compiled.get(key)
            if ranges is None:
                feed = self.feed or {}
                ranges = self._compiled[key] = [_compile(r.vulnerability, r) for r in feed.get(key, ())]
            found = self._affecting[key, version] = _affected_by(version, ranges)  # type: ignore[assignment]
        return found

    def classify(self, type_: str, slug: str, installed: str | None, offered: str | None) -> ItemVulnerabilities:
        """What one item means: its update fixes a vulnerability, leaves one open, or is routine; or unchecked.
        `offered` None is an installed item with no update pending (its vulnerabilities are all open)."""
        memo = (type_, slug, installed, offered)
        known = self._classes.get(memo)
        if known is None:
            known = self._classes[memo] = self._first(type_, slug, installed, offered)
        return known

    def _first(self, type_: str, slug: str, installed: str | None, offered: str | None) -> ItemVulnerabilities:
        key = feed_key(type_, slug)
        if key is None:
            return _ROUTINE
        if self.feed is None:
            return _NO_FEED
        if not installed:
            return _NO_VERSION
        if key not in self.feed:
            return _ROUTINE
        return self._class(key, installed, offered)

    def _class(self, key: tuple[str, str], installed: str, offered: str | None) -> ItemVulnerabilities:
        now = self.affecting(key, installed)
        if not now:
            return _ROUTINE
        after = {v.id for v in self.affecting(key, offered)} if offered else {v.id for v in now}
        fixes = tuple(v for v in now if v.id not in after)
        still = tuple(v for v in now if v.id in after)
        return ItemVulnerabilities(VulnerabilityClass.fixes if fixes else VulnerabilityClass.no_fix, fixes, still)


def classify(type_: str, slug: str, installed: str | None, offered: str | None,
             feed: Mapping[tuple[str, str], list[FeedRange]] | None) -> ItemVulnerabilities:
    """One item classed on its own (a fleet is classed through one `FleetMatch`)."""
    return FleetMatch(feed).classify(type_, slug, installed, offered)
