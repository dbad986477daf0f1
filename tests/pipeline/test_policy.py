"""The policy file: parsing, fast failures naming the field, and the decision for each item."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from fleet.model.summary import Outcome, UpdateType
from fleet.rules.policy import PolicyError, Rule, SemverRule, load_policy, parse_policy, version_change

TODAY = date(2026, 11, 21)
PLUGIN = UpdateType.plugin


def decide(policy, slug="woocommerce/woocommerce.php", name="WooCommerce", old="8.1.0", new="8.1.1",
           type_=PLUGIN, first_seen=TODAY, site=("1", "one.example"), tags=(), client=None):
    rules = policy.rules_for(site, tags, client)
    return rules.decide(type_, slug, name, old, new, first_seen, TODAY)


def test_empty_policy_applies_everything():
    policy = parse_policy({})
    assert decide(policy, old="1.0", new="9.0") is None
    assert decide(policy, type_=UpdateType.core, slug="wordpress", name="WordPress", old="6.4", new="7.0") is None


def test_yaml_and_toml_files_load_the_same_policy(tmp_path: Path):
    yaml_file = tmp_path / "policy.yaml"
    yaml_file.write_text("semver: minor\nmin_age_days: 3\ntypes: {core: false}\n"
                         "holds:\n  - {item: 'woocommerce < 9.0', reason: checkout bug, expires: 2026-12-01}\n")
    toml_file = tmp_path / "policy.toml"
    toml_file.write_text('semver = "minor"\nmin_age_days = 3\n[types]\ncore = false\n'
                         '[[holds]]\nitem = "woocommerce < 9.0"\nreason = "checkout bug"\nexpires = 2026-12-01\n')
    assert load_policy(yaml_file) == load_policy(toml_file)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"semver": "huge"}, "semver: Input should be 'patch', 'minor' or 'major'"),
        ({"min_age_days": -1}, "min_age_days: Input should be greater than or equal to 0"),
        ({"holds": [{"item": "akismet"}]}, "holds.0.reason: Field required"),
        ({"holds": [{"item": "akismet", "reason": "x", "pin": "about nine"}]}, "is not a version pin"),
        ({"holds": [{"item": "akismet < 2", "reason": "x", "pin": "<3"}]}, "either in `item` or in `pin`"),
        ({"allow": ["gadget:foo"]}, "'gadget' is not an update type"),
        ({"types": {"plugins": False}}, "types.plugins.[key]"),
        ({"semvr": "minor"}, "semvr: not a policy setting here: did you mean semver?"),
        ({"min_age_day": 3}, "min_age_day: not a policy setting here: did you mean min_age_days?"),
        ({"holds": [{"item": "akismet", "reason": "x", "expire": "2026-01-01"}]},
         "holds.0.expire: not a policy setting here: did you mean expires?"),
        ({"overrides": {"sites": {"12": {"min_age": 2}}}},
         "overrides.sites.12.min_age: not a policy setting here: did you mean min_age_days?"),
        ({"rollout": {"cohorts": ["rest", "5%"]}}, "`rest` must be the last cohort"),
        ({"rollout": {"cohorts": ["150%"]}}, "at most 100"),
        ({"rollout": {"cohorts": ["group:a"]}}, "is not a cohort"),
        ({"rollout": {"cohorts": ["rest"], "failure_budget": "lots"}}, "percentage such as `10%`"),
        ({"recipients": {"Acme": ["not-an-address"]}}, "is not an e-mail address"),
        ({"reply_to": {"Acme": "care at acme"}}, "reply_to: 'care at acme' (client 'Acme') is not an e-mail address"),
        ({"overrides": {"sites": {"12": {"semver": "tiny"}}}}, "overrides.sites.12.semver"),
        (["semver", "minor"], "must be a mapping"),
    ],
)
def test_bad_policy_fails_fast_naming_the_field(data, fragment):
    with pytest.raises(PolicyError) as raised:
        parse_policy(data)
    assert fragment in str(raised.value)


def test_bad_files_name_the_file(tmp_path: Path):
    broken = tmp_path / "p.yaml"
    broken.write_text("semver: [minor\n")
    with pytest.raises(PolicyError, match="p.yaml: not valid YAML"):
        load_policy(broken)
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        load_policy(tmp_path / "missing.yaml")
    wrong = tmp_path / "p.json"
    wrong.write_text("{}")
    with pytest.raises(PolicyError, match="must end in .yaml, .yml or .toml"):
        load_policy(wrong)


def test_type_switched_off_is_excluded():
    decision = decide(parse_policy({"types": {"plugin": False}}))
    assert (decision.outcome, decision.rule) == (Outcome.excluded, Rule.types)


def test_hold_with_reason_and_expiry():
    policy = parse_policy({"holds": [{"item": "woocommerce", "reason": "checkout bug", "expires": "2026-12-01"}]})
    decision = decide(policy)
    assert (decision.outcome, decision.rule, decision.until) == (Outcome.held, Rule.hold, date(2026, 12, 1))
    assert "checkout bug" in decision.reason
    expired = parse_policy({"holds": [{"item": "woocommerce", "reason": "old", "expires": TODAY.isoformat()}]})
    assert decide(expired) is None


def test_hold_with_version_pin_only_stops_versions_outside_the_pin():
    policy = parse_policy({"holds": [{"item": "plugin:woocommerce < 9.0", "reason": "major rewrite"}]})
    assert decide(policy, old="8.1.0", new="8.9.2") is None
    stopped = decide(policy, old="8.9.2", new="9.0.0")
    assert stopped.outcome is Outcome.held and "pinned <9.0" in stopped.reason
    assert decide(policy, slug="woocommerce", type_=UpdateType.theme, new="9.1") is None  # plugin-only hold


def test_semver_rule_globally_and_per_item():
    policy = parse_policy({"semver": "minor", "items": {"woocommerce": {"semver": "patch"}}})
    assert decide(policy, slug="akismet/akismet.php", name="Akismet", old="5.1", new="5.2") is None
    major = decide(policy, slug="akismet/akismet.php", name="Akismet", old="5.1", new="6.0")
    assert (major.outcome, major.rule) == (Outcome.excluded, Rule.semver)
    assert major.reason == "major update 5.1 -> 6.0 exceeds the minor rule"
    assert decide(policy, old="8.1.0", new="8.1.3") is None
    assert decide(policy, old="8.1.0", new="8.2.0").rule is Rule.semver
    unreadable = decide(policy, slug="akismet/akismet.php", old="five", new="six")
    assert unreadable.rule is Rule.semver and "cannot compare" in unreadable.reason


def test_semver_does_not_apply_to_translations():
    policy = parse_policy({"semver": "patch"})
    assert decide(policy, type_=UpdateType.translation, slug="woocommerce", old="2026-01-01", new="") is None


def test_version_change_sizes():
    assert version_change("6.4.2", "6.4.3") is SemverRule.patch
    assert version_change("6.4", "6.5") is SemverRule.minor
    assert version_change("6.9.1", "7.0") is SemverRule.major
    assert version_change("1.0.0-beta", "1.0.0") is SemverRule.patch
    assert version_change("", "1.0") is None


def test_minimum_age_delays_until_the_eligible_date():
    policy = parse_policy({"min_age_days": 3, "items": {"akismet": {"min_age_days": 0}}})
    seen = TODAY - timedelta(days=1)
    delayed = decide(policy, first_seen=seen)
    assert (delayed.outcome, delayed.rule, delayed.until) == (Outcome.delayed, Rule.min_age, seen + timedelta(3))
    assert "1 of 3 days" in delayed.reason
    assert decide(policy, first_seen=TODAY - timedelta(days=3)) is None
    assert decide(policy, slug="akismet/akismet.php", first_seen=TODAY) is None


def test_allow_list_mode():
    policy = parse_policy({"allow_list": True, "allow": ["akismet", "core:wordpress"]})
    assert decide(policy, slug="akismet/akismet.php", name="Akismet") is None
    assert decide(policy, type_=UpdateType.core, slug="wordpress", name="WordPress", old="6.4", new="6.4.1") is None
    refused = decide(policy)
    assert (refused.outcome, refused.rule) == (Outcome.excluded, Rule.allow_list)


def test_overrides_site_beats_client_beats_tag():
    policy = parse_policy(
        {
            "semver": "patch",
            "holds": [{"item": "akismet", "reason": "fleet-wide"}],
            "overrides": {
                "tags": {"canary": {"semver": "major"}},
                "clients": {"Acme": {"semver": "minor", "types": {"core": False}}},
                "sites": {"shop.example": {"semver": "patch", "holds": [{"item": "woocommerce", "reason": "shop"}]}},
            },
        }
    )
    assert decide(policy, new="9.0.0") is not None  # general: patch only
    assert decide(policy, new="9.0.0", tags=["Canary"]) is None
    assert decide(policy, new="9.0.0", tags=["canary"], client="acme").rule is Rule.semver  # client: minor
    assert decide(policy, new="8.2.0", tags=["canary"], client="Acme") is None
    core = decide(policy, type_=UpdateType.core, slug="wordpress", old="6.4", new="6.4.1", client="Acme")
    assert core.rule is Rule.types
    site = ("7", "shop.example")
    assert decide(policy, new="8.1.1", site=site, tags=["canary"]).reason == "held: shop"
    assert decide(policy, slug="akismet/akismet.php", site=site).reason == "held: fleet-wide"  # holds add up


def test_rollout_budget():
    policy = parse_policy({"rollout": {"cohorts": ["tag:canary", "5%", "rest"], "failure_budget": "10%"}})
    assert policy.rollout.budget_for(50) == 5
    assert parse_policy({"rollout": {"cohorts": ["rest"], "failure_budget": 2}}).rollout.budget_for(50) == 2


def test_every_client_a_policy_names_is_checked_against_the_dashboard_with_the_file_named(tmp_path: Path) -> None:
    from fleet.rules.policy import check_client_names

    path = tmp_path / "policy.yaml"
    path.write_text(
        "overrides:\n  clients:\n    ACME LTD: {semver: patch}\n    Overridden Typo: {semver: patch}\n"
        "windows:\n  clients:\n    Window Typo: {timezone: UTC, hours: '02:00-05:00'}\n"
        "blackouts:\n  - {from: 2026-11-27, to: 2026-11-30, clients: [Acme Ltd, Blackout Typo], reason: sale}\n"
        "rollout:\n  cohorts: ['client:Cohort Typo', rest]\n"
        "recipients:\n  acme ltd: [ops@acme.example]\n")
    policy = load_policy(path)
    check_client_names(parse_policy({"recipients": {"Acme Ltd": ["a@b.example"]}}), ["acme ltd"])  # any case
    with pytest.raises(PolicyError) as raised:
        check_client_names(policy, ["Acme Ltd"], path)
    assert str(raised.value) == (
        f"{path}: overrides.clients: the dashboard has no client named 'Overridden Typo'; windows.clients: the "
        "dashboard has no client named 'Window Typo'; blackouts.0.clients: the dashboard has no client named "
        "'Blackout Typo'; rollout.cohorts: the dashboard has no client named 'Cohort Typo'")
