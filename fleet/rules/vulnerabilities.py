"""Which vulnerabilities affect a version, and what a pending update means for them.

Versions compare as WordPress compares them, by PHP's `version_compare` (not SemVer): ported here line for line
from php-src `ext/standard/versioning.c` and tested against a table PHP itself produced
(`tests/rules/data/php_version_compare.tsv`). `*` at either end of a feed's range leaves it open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

from fleet.model.vulnerability import (
    WILDCARD,
    AffectedRange,
    AffectedSoftware,
    ItemSecurity,
    Security,
    Vulnerability,
)

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


@lru_cache(maxsize=1 << 17)
def version_compare(version1: str, version2: str) -> int:
    """PHP's version_compare($version1, $version2): -1, 0 or 1."""
    return _compare(version1.encode("utf-8", "surrogateescape"), version2.encode("utf-8", "surrogateescape"))


def in_range(version: str, bounds: AffectedRange) -> bool:
    """The version lies in the range (`*` opens an end; each end inclusive or not)."""
    if bounds.from_version != WILDCARD:
        low = version_compare(version, bounds.from_version)
        if low < 0 or (low == 0 and not bounds.from_inclusive):
            return False
    if bounds.to_version != WILDCARD:
        high = version_compare(version, bounds.to_version)
        if high > 0 or (high == 0 and not bounds.to_inclusive):
            return False
    return True


def affecting(version: str, software: Iterable[AffectedSoftware]) -> list[Vulnerability]:
    """The vulnerabilities whose ranges hold `version`, each once, in the feed's order."""
    found: dict[str, Vulnerability] = {}
    for entry in software:
        if entry.vulnerability.id not in found and any(in_range(version, bounds) for bounds in entry.ranges):
            found[entry.vulnerability.id] = entry.vulnerability
    return list(found.values())


def feed_key(type_: str, slug: str) -> tuple[str, str] | None:
    """The (type, slug) the feed knows an item by; None for what it never covers (translations). A plugin is known
    by its directory (`akismet/akismet.php` -> `akismet`); WordPress core is `wordpress` whatever its slug here."""
    feed_type = FEED_TYPES.get(type_)
    if feed_type is None:
        return None
    if feed_type == "core":
        return feed_type, "wordpress"
    return feed_type, slug.split("/")[0].removesuffix(".php").lower()


def classify(type_: str, slug: str, installed: str | None, offered: str | None,
             feed: Mapping[tuple[str, str], list[AffectedSoftware]] | None) -> ItemSecurity:
    """What one item means: its update fixes a vulnerability, leaves one open, or is routine; or unchecked.

    `offered` None is an installed item with no update pending (its vulnerabilities are all open). `feed` None:
    no copy of the feed to match against.
    """
    key = feed_key(type_, slug)
    if key is None:
        return ItemSecurity(security=Security.routine)
    if feed is None:
        return ItemSecurity(security=Security.unchecked, why_unchecked="no copy of the vulnerability feed")
    if not installed:
        return ItemSecurity(security=Security.unchecked, why_unchecked="the installed version is not known")
    now = affecting(installed, feed.get(key, ()))
    if not now:
        return ItemSecurity(security=Security.routine)
    after = {v.id for v in affecting(offered, feed.get(key, ()))} if offered else {v.id for v in now}
    fixes = [v for v in now if v.id not in after]
    still = [v for v in now if v.id in after]
    return ItemSecurity(security=Security.fixes if fixes else Security.no_fix, fixes=fixes, open=still)
