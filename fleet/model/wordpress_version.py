"""WordPress versions in the order WordPress and MainWP give them: PHP's `version_compare`, ported line for line
from php-src `ext/standard/versioning.c` and tested against a table PHP itself produced
(`tests/rules/data/php_version_compare.tsv`, `tests/rules/test_wordpress_version.py`).

Not PEP 440 (`packaging.Version`): PHP orders `2.0.0` after `2.0` and `1.0-pl1` after `1.0`, reads `5.9.x-dev`
and `1.0.0-alpha.1`, and calls nothing invalid. The feed's ranges, the semver rule, an incident's "newer than the
bad version" and the child's minimum version all compare through here.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

_SPECIAL_FORMS = ((b"dev", 0), (b"alpha", 1), (b"a", 1), (b"beta", 2), (b"b", 2), (b"RC", 3), (b"rc", 3),
                  (b"#", 4), (b"pl", 5), (b"p", 5))
_NUMBER = b"#N#"
_LONG_MAX = 2**63 - 1


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
def plain_numbers(version: str) -> tuple[int, ...] | None:
    """A version of digits and dots only (`6.4.2`), as PHP reads its parts; None for anything else."""
    if not version or not version.isascii() or not version.replace(".", "").isdigit() or "" in version.split("."):
        return None
    return tuple(min(int(part), _LONG_MAX) for part in version.split("."))


def version_compare(version1: str, version2: str) -> int:
    """PHP's version_compare($version1, $version2): -1, 0 or 1.

    Two versions of digits and dots compare as tuples of numbers (a longer one, equal so far, is greater: PHP's
    rule for a remaining numeric part); any other pair goes through the port of PHP's algorithm."""
    numbers1, numbers2 = plain_numbers(version1), plain_numbers(version2)
    if numbers1 is not None and numbers2 is not None:
        return (numbers1 > numbers2) - (numbers1 < numbers2)
    return _php_compare(version1, version2)


@lru_cache(maxsize=1 << 16)
def _php_compare(version1: str, version2: str) -> int:
    return _compare(version1.encode("utf-8", "surrogateescape"), version2.encode("utf-8", "surrogateescape"))


def newer(version: str | None, than: str | None) -> bool:
    """`version` comes after `than` (nothing is newer than, or older than, a version not known)."""
    if not version or not than:
        return False
    return version_compare(version, than) > 0


def older(version: str | None, than: str) -> bool:
    """`version` comes before `than` (a version not known is not older)."""
    if not version:
        return False
    return version_compare(version, than) < 0


def release_numbers(version: str) -> tuple[int, ...]:
    """The leading numeric parts of a version as PHP splits it (`6.4.2-beta1` -> (6, 4, 2)): what a major,
    minor or patch change is measured on; () when it starts with none."""
    numbers = []
    for part in canonical(version.encode("utf-8", "surrogateescape")).split(b"."):
        if not part[:1].isdigit():
            break
        numbers.append(_strtol(part))
    return tuple(numbers)


_PIN_OPERATORS: dict[str, Callable[[int, int], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
_PIN_CLAUSE = re.compile(r"\s*(<=|>=|==|!=|<|>)\s*([^\s,<>=!]+)\s*")


@dataclass(frozen=True)
class VersionPin:
    """A hold's version pin (`< 9.0`, `>=8.1, <9`): every clause met, in PHP's order (a pin on `9.0` keeps
    `9.0.0` out, as WordPress orders `9.0.0` after `9.0`)."""

    clauses: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, text: str) -> VersionPin:
        clauses = []
        for part in text.split(","):
            found = _PIN_CLAUSE.fullmatch(part)
            if found is None:
                raise ValueError(f"{text!r} is not a version pin (e.g. `< 9.0` or `>=8.1,<9`: each part one of "
                                 f"{', '.join(_PIN_OPERATORS)} and a version)")
            clauses.append((found[1], found[2]))
        return cls(tuple(clauses))

    def allows(self, version: str | None) -> bool:
        """`version` meets every clause (a version not known cannot be shown to)."""
        if not version:
            return False
        return all(_PIN_OPERATORS[op](version_compare(version, bound), 0) for op, bound in self.clauses)

    def __str__(self) -> str:
        return ",".join(f"{op}{bound}" for op, bound in self.clauses)
