"""Lanes: each chunk of a cohort's sites carries exactly its planned items and the slugs its calls must avoid."""

from __future__ import annotations

from fleet.engine.lanes import split_into_lanes
from fleet.model.summary import UpdateType
from fleet.model.vulnerability import ItemVulnerabilities, Vulnerability, VulnerabilityClass
from fleet.rules.plan import Decision, IgnoreEntry, PlanCohort, SiteStatus
from fleet.rules.policy import parse_policy
from tests.pipeline.test_plan import P, T, plan_of, site, upd


def test_lanes_split_the_cohort_and_keep_every_site_with_its_items():
    sites = [site(i) for i in range(1, 8)] + [site(8, status=SiteStatus.offline, status_reason="down")]
    pending = [upd(i, P, f"p{i}") for i in range(1, 9)] + [upd(3, T, "t3", "1.0", "1.1")]
    plan = plan_of(sites, pending, ignored=[IgnoreEntry(site_id=2, type=P, slug="held.php")])
    cohort = PlanCohort(name="all", site_ids=[1, 2, 3, 4, 5, 6, 8])  # 7 is in another cohort; 8 has no work

    lanes = split_into_lanes(plan, cohort, lane_size=3)

    assert [lane.label for lane in lanes] == ["1-of-2", "2-of-2"]
    assert [lane.site_ids for lane in lanes] == [[1, 2, 3], [4, 5, 6]]
    planned = [(item.site_id, item.slug) for lane in lanes for item in lane.items]
    expected = [(i.site_id, i.slug) for i in plan.to_apply(cohort.site_ids)]
    assert sorted(planned) == sorted(expected)
    assert all(item.decision is Decision.apply for lane in lanes for item in lane.items)
    assert [item.slug for item in lanes[0].items_of(UpdateType.theme)] == ["t3"]
    assert lanes[0].untouchable == {UpdateType.plugin: {2: ["held.php"]}}
    assert lanes[1].untouchable == {}


def test_items_held_by_policy_are_untouchable_for_their_type():
    plan = plan_of([site(1)], [upd(1, P, "a"), upd(1, P, "b")],
                   policy=parse_policy({"holds": [{"item": "b", "reason": "freeze"}]}))
    (lane,) = split_into_lanes(plan, PlanCohort(name="all", site_ids=[1]), lane_size=500)
    assert [item.slug for item in lane.items] == ["a"]
    assert lane.untouchable == {UpdateType.plugin: {1: ["b"]}}


def test_a_cohort_without_work_has_no_lanes():
    plan = plan_of([site(1)], [])
    assert split_into_lanes(plan, PlanCohort(name="all", site_ids=[1]), lane_size=10) == []


def test_fixes_go_first_the_sites_with_a_security_fix_fill_the_first_lanes_with_their_servers():
    sites = [site(i, ip=f"10.0.0.{i}") for i in range(1, 6)] + [site(6, ip="10.0.0.2")]  # 6 shares 2's server
    plan = plan_of(sites, [upd(i, P, f"p{i}") for i in range(1, 7)])
    fix = ItemVulnerabilities(VulnerabilityClass.fixes, fixes=(Vulnerability(id="v1", cve="CVE-2026-1"),))
    for item in plan.items:
        item.security = fix if item.site_id in (5, 2) else ItemVulnerabilities(VulnerabilityClass.routine)
    lanes = split_into_lanes(plan, PlanCohort(name="all", site_ids=list(range(1, 7))), lane_size=2)
    assert [lane.site_ids for lane in lanes] == [[2, 6], [5, 1], [3, 4]]
    routine = plan_of(sites, [upd(i, P, f"p{i}") for i in range(1, 7)])  # without fixes: as before
    assert [lane.site_ids for lane in split_into_lanes(routine, PlanCohort(name="all", site_ids=list(range(1, 7))),
                                                       lane_size=2)] == [[1, 2], [6, 3], [4, 5]]
