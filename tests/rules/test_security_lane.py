"""The security lane in the plan: a fix at or above the policy's threshold goes past min_age_days and a closed
window, never past a blackout, a hold or the semver rule; the policy's `security:` keeps them in or asks a person."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from fleet.model.summary import Selection, UpdateType
from fleet.model.vulnerability import ItemVulnerabilities, Vulnerability, VulnerabilityClass
from fleet.rules.plan import Decision, DetectedUpdate, PlanRequest, SiteRecord, build_plan
from fleet.rules.policy import PolicyError, Rule, parse_policy
from fleet.rules.windows import Deferral

NOW = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
SLUG = "forms/forms.php"
HIGH = Vulnerability(id="v1", cve="CVE-2026-1", cvss_score=7.5, cvss_rating="High")
FIX = {(1, "plugin", SLUG): ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(HIGH,))}


def plan_of(policy: dict, deferral: Deferral | None = None, vulnerabilities=FIX, first_seen: date = NOW.date()):
    site = SiteRecord(id=1, url="https://one.example/", name="One", deferral=deferral)
    update = DetectedUpdate(site_id=1, type=UpdateType.plugin, slug=SLUG, name="Forms", from_version="1.0",
                            to_version="1.0.1")
    plan = build_plan(PlanRequest(run_id="r", created_at=NOW, sites=[site], pending=[update], ignored=[],
                                  policy=parse_policy(policy), first_seen={update.release: first_seen},
                                  selection=Selection(), vulnerabilities=vulnerabilities))
    return plan.items[0], plan.sites[0]


WINDOW = Deferral(reason="outside its maintenance window (02:00-04:00 UTC)", opens_at=NOW)
BLACKOUT = Deferral(reason="blackout: Black Friday", opens_at=NOW, blackout=True)


def test_a_fix_goes_past_min_age_and_a_closed_window_and_opens_its_site():
    item, site = plan_of({"min_age_days": 30}, WINDOW)
    assert item.decision is Decision.apply and site.deferral is None


def test_a_routine_update_waits_as_before():
    item, site = plan_of({"min_age_days": 30}, None, vulnerabilities={})
    assert item.decision is Decision.delayed and item.rule == Rule.min_age
    item, site = plan_of({}, WINDOW, vulnerabilities={})
    assert item.decision is Decision.deferred and site.deferral == WINDOW


@pytest.mark.parametrize(("policy", "deferral", "decision"), [
    ({"min_age_days": 30, "security": {"min_age": True}}, None, Decision.delayed),
    ({"security": {"windows": True}}, WINDOW, Decision.deferred),
    ({}, BLACKOUT, Decision.deferred),  # a blackout is never passed
    ({"min_age_days": 30, "security": {"min_cvss": 9}}, None, Decision.delayed),  # below the threshold
    ({"min_age_days": 30, "security": {"min_rating": "critical"}}, None, Decision.delayed),
    ({"min_age_days": 30, "security": {"min_rating": "high"}}, None, Decision.apply),
    ({"holds": [{"item": "forms", "reason": "broken checkout"}]}, None, Decision.held),
    ({"semver": "patch"}, None, Decision.apply),
    ({"min_age_days": 30, "security": {"approval": True}}, None, Decision.awaiting_approval),
])
def test_what_the_policy_keeps(policy, deferral, decision):
    item, _ = plan_of(policy, deferral)
    assert item.decision is decision, item.reason


def test_a_bad_security_key_is_named():
    with pytest.raises(PolicyError, match="min_rating"):
        parse_policy({"security": {"min_rating": "severe"}})
