"""Which vulnerabilities affect a version, and what a pending update means for them.

Versions compare as WordPress compares them, by PHP's `version_compare` (not SemVer): ported here line for line
from php-src `ext/standard/versioning.c` and tested against a table PHP itself produced
(`tests/rules/data/php_version_compare.tsv`). `*` at either end of a feed's range leaves it open.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from fleet.model.vulnerability import (
    WILDCARD,
    AffectedRange,
    FeedRange,
    ItemSecurity,
    Security,
    Vulnerability,
)
from fleet.rules.policy import SecurityLane

_SPECIAL_FORMS = ((b"dev", 0), (b"alpha", 1), (b"a", 1), (b"beta", 2), (b"b", 2), (b"RC", 3), (b"rc", 3),
                  (b"#", 4), (b"pl", 5), (b"p", 5))
_NUMBER = b"#N#"
_LONG_MAX = 2**63 - 1
FEED_TYPES = {"plugin": "plugin", "theme": "theme", "core": "core"}  # the dashboard's update types the feed covers


def _digit(c: int | None) -> bool:
    return c is not None and 0x30 <= c <= 0x39


def _alnum(c: int) -> bool:
    return _digit(c) or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A


def canonical(version: bytes) -> bytes:
    """php_canonicalize_version: `-`, `_`, `+` and any other non-alphanumeric become one `.`, and a `.` goes
    between a digit and a non-digit (`1.0rc1` -> `1.0.rc.1`)."""
    if not version:
        return b""
    out = bytearray(version[:1])
    last = version[0]
    for c in version[1:]:
        last_digit, last_other = _digit(last), not _digit(last) and last != 0x2E
        is_digit, is_other = _digit(c), not _digit(c) and c != 0x2E
        if c in b"-_+":
            if out[-1] != 0x2E:
                out.append(0x2E)
        elif (last_other and is_digit) or (last_digit and is_other):
            if out[-1] != 0x2E:
                out.append(0x2E)
            out.append(c)
        elif not _alnum(c):
            if out[-1] != 0x2E:
                out.append(0x2E)
        else:
            out.append(c)
        last = c
    return bytes(out)


def _special(form1: bytes, form2: bytes) -> int:
    """compare_special_version_forms: dev < alpha = a < beta = b < RC = rc < # < pl = p (by prefix); else -1."""
    found1 = next((order for name, order in _SPECIAL_FORMS if form1.startswith(name)), -1)
    found2 = next((order for name, order in _SPECIAL_FORMS if form2.startswith(name)), -1)
    return (found1 > found2) - (found1 < found2)


def _strtol(part: bytes) -> int:
    digits = len(part) - len(part.lstrip(b"0123456789"))
    return min(int(part[:digits]), _LONG_MAX)


def _compare(version1: bytes, version2: bytes) -> int:
    if not version1 or not version2:
        return 0 if not version1 and not version2 else (1 if version1 else -1)
    ver1 = version1 if version1[:1] == b"#" else canonical(version1)
    ver2 = version2 if version2[:1] == b"#" else canonical(version2)
    parts1, parts2 = ver1.split(b"."), ver2.split(b".")
    i = j = 0
    more1 = more2 = True  # n1 / n2 of the C code: a '.' followed the part just read
    compare = 0
    # the C loop goes on while both remainders are non-empty (an empty part before a '.' counts as text)
    while (parts1[i] or i + 1 < len(parts1)) and (parts2[j] or j + 1 < len(parts2)) and more1 and more2:
        p1, p2 = parts1[i], parts2[j]
        more1, more2 = i + 1 < len(parts1), j + 1 < len(parts2)
        d1, d2 = p1[:1].isdigit(), p2[:1].isdigit()
        if d1 and d2:
            l1, l2 = _strtol(p1), _strtol(p2)
            compare = (l1 > l2) - (l1 < l2)
        elif not d1 and not d2:
            compare = _special(p1, p2)
        else:
            compare = _special(_NUMBER, p2) if d1 else _special(p1, _NUMBER)
        if compare != 0:
            break
        if more1:
            i += 1
        if more2:
            j += 1
    if compare == 0:
        if more1:
            rest1 = b".".join(parts1[i:])
            compare = 1 if rest1[:1].isdigit() else _compare(rest1, _NUMBER)
        elif more2:
            rest2 = b".".join(parts2[j:])
            compare = -1 if rest2[:1].isdigit() else _compare(_NUMBER, rest2)
    return compare


@lru_cache(maxsize=1 << 16)
def _numbers(version: str) -> tuple[int, ...] | None:
    """A version of digits and dots only (`6.4.2`), as PHP reads its parts; None for anything else."""
    if not version or not version.isascii() or not version.replace(".", "").isdigit() or "" in version.split("."):
        return None
    return tuple(min(int(part), _LONG_MAX) for part in version.split("."))


def version_compare(version1: str, version2: str) -> int:
    """PHP's version_compare($version1, $version2): -1, 0 or 1.

    Two versions of digits and dots compare as tuples of numbers (a longer one, equal so far, is greater: PHP's
    rule for a remaining numeric part); any other pair goes through the port of PHP's algorithm."""
    numbers1, numbers2 = _numbers(version1), _numbers(version2)
    if numbers1 is not None and numbers2 is not None:
        return (numbers1 > numbers2) - (numbers1 < numbers2)
    return _php_compare(version1, version2)


@lru_cache(maxsize=1 << 16)
def _php_compare(version1: str, version2: str) -> int:
    return _compare(version1.encode("utf-8", "surrogateescape"), version2.encode("utf-8", "surrogateescape"))


# A range with its ends read once: (id, vulnerability, low, low's numbers, low inclusive, high, high's numbers,
# high inclusive); an end is None for `*`, its numbers None unless it is a plain version (digits and dots).
_Compiled = tuple[str, "Vulnerability | None", "str | None", "tuple[int, ...] | None", bool, "str | None",
                  "tuple[int, ...] | None", bool]


def _compile(vulnerability: Vulnerability | None, bounds: AffectedRange | FeedRange) -> _Compiled:
    low = None if bounds.from_version == WILDCARD else bounds.from_version
    high = None if bounds.to_version == WILDCARD else bounds.to_version
    return (vulnerability.id if vulnerability else "", vulnerability, low, _numbers(low) if low else None,
            bounds.from_inclusive, high, _numbers(high) if high else None, bounds.to_inclusive)


def _affected_by(version: str, ranges: list[_Compiled]) -> list[Vulnerability | None]:
    """The vulnerabilities with a range that holds `version`, each once, in the feed's order. Plain versions on
    both sides compare as tuples of numbers (what PHP's rules give them); the rest through `version_compare`.
    Written flat: a fleet's matching spends its time here."""
    numbers = _numbers(version)
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


_ROUTINE = ItemSecurity(security=Security.routine)
_NO_FEED = ItemSecurity(security=Security.unchecked, why_unchecked="no copy of the vulnerability feed")
_NO_VERSION = ItemSecurity(security=Security.unchecked, why_unchecked="the installed version is not known")


class FleetMatch:
    """The feed's entries for a fleet's (type, slug) pairs (None: no copy of the feed), matched once per version.

    A fleet runs few versions of each item: each (item, version) is compared with the feed's ranges once, and each
    (item, installed, offered) classed once, whatever the number of sites (the answers are frozen, so shared).
    """

    def __init__(self, feed: Mapping[tuple[str, str], list[FeedRange]] | None) -> None:
        self.feed = feed
        self._compiled: dict[tuple[str, str], list[_Compiled]] = {}
        self._affecting: dict[tuple[tuple[str, str], str], list[Vulnerability]] = {}
        self._classes: dict[tuple[str, str, str | None, str | None], ItemSecurity] = {}

    def affecting(self, key: tuple[str, str], version: str) -> list[Vulnerability]:
        found = self._affecting.get((key, version))
        if found is None:
            ranges = self._compiled.get(key)
            if ranges is None:
                feed = self.feed or {}
                ranges = self._compiled[key] = [_compile(r.vulnerability, r) for r in feed.get(key, ())]
            found = self._affecting[key, version] = _affected_by(version, ranges)  # type: ignore[assignment]
        return found

    def classify(self, type_: str, slug: str, installed: str | None, offered: str | None) -> ItemSecurity:
        """What one item means: its update fixes a vulnerability, leaves one open, or is routine; or unchecked.
        `offered` None is an installed item with no update pending (its vulnerabilities are all open)."""
        memo = (type_, slug, installed, offered)
        known = self._classes.get(memo)
        if known is None:
            known = self._classes[memo] = self._first(type_, slug, installed, offered)
        return known

    def _first(self, type_: str, slug: str, installed: str | None, offered: str | None) -> ItemSecurity:
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

    def _class(self, key: tuple[str, str], installed: str, offered: str | None) -> ItemSecurity:
        now = self.affecting(key, installed)
        if not now:
            return _ROUTINE
        after = {v.id for v in self.affecting(key, offered)} if offered else {v.id for v in now}
        fixes = tuple(v for v in now if v.id not in after)
        still = tuple(v for v in now if v.id in after)
        return ItemSecurity(Security.fixes if fixes else Security.no_fix, fixes, still)


def classify(type_: str, slug: str, installed: str | None, offered: str | None,
             feed: Mapping[tuple[str, str], list[FeedRange]] | None) -> ItemSecurity:
    """One item classed on its own (a fleet is classed through one `FleetMatch`)."""
    return FleetMatch(feed).classify(type_, slug, installed, offered)


def urgent_fix(security: ItemSecurity | None, lane: SecurityLane) -> str | None:
    """The vulnerabilities at or above the policy's threshold that the item's update fixes, in a few words (the
    worst first); None when it fixes none: the item is routine for the security lane."""
    if security is None or security.security is not Security.fixes:
        return None
    counted = sorted((v for v in security.fixes if lane.counts(v.cvss_score, v.cvss_rating)),
                     key=lambda v: -(v.cvss_score if v.cvss_score is not None else 10.0))
    return ", ".join(v.label for v in counted) or None
