"""WordPress versions in PHP's order: `version_compare` checked against a table PHP itself wrote
(data/make_php_version_compare.sh), and the rules that order versions (the semver rule's change size, an incident's
"newer than the bad version", the child's minimum) shown where PEP 440's `packaging.Version` ordered them otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.wordpress_version import VersionPin, canonical, newer, older, release_numbers, version_compare
from fleet.rules.dashboard_records import child_too_old
from fleet.rules.policy import Hold, SemverRule, version_change

TABLE = Path(__file__).parent / "data" / "php_version_compare.tsv"


def php_table() -> list[tuple[str, str, int]]:
    rows = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            left, right, result = line.split("\t")
            rows.append((left, right, int(result)))
    return rows


def test_version_compare_agrees_with_php_on_every_pair_of_the_table() -> None:
    rows = php_table()
    assert len(rows) > 7000
    wrong = [(left, right, php, version_compare(left, right)) for left, right, php in rows
             if version_compare(left, right) != php]
    assert wrong == []


@pytest.mark.parametrize(("version", "expected"), [
    ("1.0rc1", "1.0.rc.1"), ("1.0-beta_2+3", "1.0.beta.2.3"), ("1..0", "1.0"), (".1", ".1"), ("1.0+", "1.0."),
])
def test_canonical_forms(version: str, expected: str) -> None:
    assert canonical(version.encode()) == expected.encode()


def test_special_forms_order() -> None:
    order = ["1.0-dev", "1.0alpha", "1.0beta", "1.0RC1", "1.0", "1.0pl1"]
    assert all(version_compare(a, b) == -1 for a, b in zip(order, order[1:], strict=False))
    assert version_compare("1.0a", "1.0alpha") == 0 and version_compare("1.0p", "1.0pl") == 0


@pytest.mark.parametrize(("version", "than", "is_newer"), [
    ("2.0.0", "2.0", True),  # PEP 440: equal (trailing zeros), so an incident's bad 2.0 "held" its 2.0.0 fix
    ("1.0-pl1", "1.0", True),  # a patch level after its release; PEP 440 cannot read it
    ("5.9.x-dev", "5.9", False),  # PEP 440 cannot read it
    ("1.0.0-alpha.1", "1.0.0", False),  # an alpha before its release, in both orders
    ("1.10", "1.9", True),
    ("1.0", "1.0", False), (None, "1.0", False), ("1.0", None, False), ("", "1.0", False),
])
def test_newer_in_php_order(version: str | None, than: str | None, is_newer: bool) -> None:
    assert newer(version, than) is is_newer


def test_older_knows_nothing_of_a_missing_version() -> None:
    assert older("3.9.9", "4.0.0") and older("4.0", "4.0.0")  # PHP: a shorter equal prefix is older
    assert not older(None, "4.0.0") and not older("", "4.0.0") and not older("4.0.0", "4.0.0")


@pytest.mark.parametrize(("version", "numbers"), [
    ("6.4.2", (6, 4, 2)), ("6.4.2-beta1", (6, 4, 2)), ("6.4rc1", (6, 4)), ("10", (10,)), ("v1.2", ()), ("", ()),
    ("1.0.0-alpha.1", (1, 0, 0)),
])
def test_release_numbers_are_the_leading_numeric_parts(version: str, numbers: tuple[int, ...]) -> None:
    assert release_numbers(version) == numbers


@pytest.mark.parametrize(("old", "new", "size"), [
    ("6.4.2", "6.5.0", SemverRule.minor), ("6.4", "6.4.1", SemverRule.patch), ("1.9", "2.0", SemverRule.major),
    ("1.0.0-alpha.1", "1.0.1", SemverRule.patch),
    ("5.9.x-dev", "6.0", SemverRule.major),  # PEP 440 cannot read 5.9.x-dev: "cannot compare", held back
    ("v1", "v2", None),  # PEP 440 read past a leading v, PHP does not (`v.1`): not sized, "cannot compare" said
])
def test_the_semver_rule_sizes_a_change_on_php_parts(old: str, new: str, size: SemverRule | None) -> None:
    assert version_change(old, new) == size


def test_the_childs_minimum_is_compared_as_mainwp_compares_it() -> None:
    """MainWP refuses a child below its minimum by `version_compare($child_version, $min, '<')`."""
    assert child_too_old("3.9.9") and child_too_old("4.0-beta1") and child_too_old("4.0")  # 4.0 < 4.0.0 in PHP
    assert not child_too_old("4.0.0") and not child_too_old("5.1.2") and not child_too_old(None)



@pytest.mark.parametrize(("pin", "version", "allowed"), [
    ("< 9.0", "8.9.2", True), ("< 9.0", "9.0", False),
    ("< 9.0", "9.0-beta1", True),  # PHP: a beta comes before its release
    ("<= 9.0", "9.0.0", False),  # PEP 440 called 9.0.0 equal to 9.0 and let it through
    (">=8.1, <9", "8.0.9", False), (">=8.1,<9", "8.5", True), ("!= 8.2.1", "8.2.1", False),
    ("< 9.0", None, False), ("< 9.0", "", False),  # a version not known cannot be shown to respect the pin
])
def test_a_version_pin_in_php_order(pin: str, version: str | None, allowed: bool) -> None:
    assert VersionPin.parse(pin).allows(version) is allowed


def test_a_holds_pin_keeps_out_what_wordpress_orders_after_it() -> None:
    """`<= 9.0` keeps 9.0.0 out (PHP: after 9.0); PEP 440's specifier called them equal and let 9.0.0 through."""
    hold = Hold(item="woocommerce <= 9.0", reason="the 9.0 line first")
    assert hold.holds_version("9.0.0") and hold.holds_version("9.1") and hold.holds_version(None)
    assert not hold.holds_version("9.0") and not hold.holds_version("8.9.2")
    assert str(hold.version_pin) == "<=9.0"


@pytest.mark.parametrize("text", ["about nine", "~= 9.0", "9.0", "< 9.0,", "<"])
def test_a_pin_that_is_not_one_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match="is not a version pin"):
        VersionPin.parse(text)
