"""Plan building: ignore lists merged in, site status, selection, policy, cohorts, first-seen store."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from fleet.model.summary import HealthCheck, Item, Outcome, Selection, UpdateType
from fleet.rules.plan import (
    Decision,
    DetectedUpdate,
    IgnoreEntry,
    PlanRequest,
    SiteRecord,
    SiteStatus,
    build_plan,
    select_sites,
    unmatched_selection,
)
from fleet.rules.policy import Rule, parse_policy
from fleet.rules.rollout import assign_cohorts, failed_sites, judge_cohort, stop_cohorts
from fleet.state.first_seen import FirstSeenStore
from fleet.state.job_journal import JobJournal, JournalEntry

NOW = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
P, T, C, L = UpdateType.plugin, UpdateType.theme, UpdateType.core, UpdateType.translation


def site(id_, **kw):
    return SiteRecord(id=id_, url=f"https://site{id_}.example/", name=f"Site {id_}", **kw)


def upd(site_id, type_=P, slug="akismet/akismet.php", old="5.0", new="5.0.1"):
    return DetectedUpdate(site_id=site_id, type=type_, slug=slug, name=slug, from_version=old, to_version=new)


def plan_of(sites, pending, ignored=(), policy=None, selection=None, first_seen=None):
    return build_plan(PlanRequest(
        run_id="r1", created_at=NOW, sites=sites, pending=pending, ignored=list(ignored),
        policy=policy or parse_policy({}), first_seen=first_seen or {}, selection=selection or Selection(),
    ))


def by_key(plan):
    return {(i.site_id, i.type, i.slug): i for i in plan.items}


def test_every_pending_and_ignored_item_gets_one_decision():
    sites = [site(1), site(2, status=SiteStatus.offline, status_reason="Site is known to be offline.")]
    pending = [upd(1), upd(1, T, "twentyfour", "1.0", "1.1"), upd(2), upd(1)]  # a duplicate row
    ignored = [
        IgnoreEntry(site_id=1, type=P, slug="hello.php", name="Hello Dolly"),  # not pending: still reported
        IgnoreEntry(site_id=1, type=T, slug="twentyfour", ignored_version="1.1"),
        IgnoreEntry(site_id=9, type=P, slug="hello.php"),  # a site outside the selection
    ]
    plan = plan_of(sites, pending, ignored)
    items = by_key(plan)
    assert len(plan.items) == 4
    assert items[(1, P, "akismet/akismet.php")].decision is Decision.apply
    assert items[(1, T, "twentyfour")].decision is Decision.ignored
    assert items[(1, T, "twentyfour")].reason == "on the dashboard's ignore list (version 1.1)"
    hello = items[(1, P, "hello.php")]
    assert (hello.decision, hello.rule, hello.to_version) == (Decision.ignored, Rule.ignore_list, None)
    offline = items[(2, P, "akismet/akismet.php")]
    assert (offline.decision, offline.reason) == (Decision.skipped, "Site is known to be offline.")


def test_version_specific_ignore_does_not_cover_a_newer_version():
    plan = plan_of([site(1)], [upd(1, new="5.2")], [IgnoreEntry(site_id=1, type=P, slug="akismet/akismet.php",
                                                                  ignored_version="5.1,5.1.1")])
    assert plan.items[0].decision is Decision.apply


def test_types_outside_the_selection_are_excluded():
    plan = plan_of([site(1)], [upd(1), upd(1, C, "wordpress", "6.4", "6.5")], selection=Selection(types=[P]))
    core = by_key(plan)[(1, C, "wordpress")]
    assert (core.decision, core.rule) == (Decision.excluded, Rule.selection)


def test_policy_decisions_carry_rule_reason_and_date():
    hold = {"item": "akismet", "reason": "wait", "expires": "2027-01-01"}
    policy = parse_policy({"min_age_days": 2, "holds": [hold]})
    first_seen = {("theme", "twentyfour", "1.1"): date(2026, 11, 20)}
    plan = plan_of([site(1)], [upd(1), upd(1, T, "twentyfour", "1.0", "1.1")], policy=policy, first_seen=first_seen)
    items = by_key(plan)
    assert items[(1, P, "akismet/akismet.php")].until == date(2027, 1, 1)
    theme = items[(1, T, "twentyfour")]
    assert (theme.decision, theme.until) == (Decision.delayed, date(2026, 11, 22))


def test_selection_by_id_domain_tag_and_client():
    sites = [site(1, tags=["Canary"], client="Acme"), site(2, client="Beta"), site(3, tags=["canary"])]
    assert [s.id for s in select_sites(sites, Selection(sites=["2", "www.site3.example"]))] == [2, 3]
    assert [s.id for s in select_sites(sites, Selection(sites=["https://site1.example/x"]))] == [1]
    assert [s.id for s in select_sites(sites, Selection(tags=["CANARY"]))] == [1, 3]
    assert [s.id for s in select_sites(sites, Selection(tags=["canary"], clients=["acme"]))] == [1]
    assert select_sites(sites, Selection()) == sites
    assert unmatched_selection(sites, Selection(sites=["1", "nosuch.example"])) == ["nosuch.example"]


def test_cohorts_tag_percent_rest_and_sites_without_a_cohort():
    sites = [site(i, tags=["canary"] if i < 3 else []) for i in range(1, 41)]
    plan = plan_of(sites, [upd(i) for i in range(1, 41)])
    policy = parse_policy({"rollout": {"cohorts": ["tag:canary", "10%", "rest"], "failure_budget": 1}})
    assign_cohorts(plan, policy.rollout)
    sizes = {c.name: len(c.site_ids) for c in plan.cohorts}
    assert sizes == {"tag:canary": 2, "10%": 4, "rest": 34}
    assert plan.cohorts[0].site_ids == [1, 2]
    assert {i.cohort for i in plan.items} == {"tag:canary", "10%", "rest"}
    # the percentage cohort is stable from night to night
    again = assign_cohorts(plan_of(sites, [upd(i) for i in range(1, 41)]), policy.rollout)
    assert again.cohorts[1].site_ids == plan.cohorts[1].site_ids

    partial = assign_cohorts(plan_of(sites, [upd(i) for i in range(1, 41)]),
                             parse_policy({"rollout": {"cohorts": ["tag:canary"]}}).rollout)
    outside = [i for i in partial.items if i.site_id > 2]
    assert {(i.decision, i.rule) for i in outside} == {(Decision.excluded, Rule.rollout)}


def test_cohort_over_budget_stops_the_later_cohorts():
    sites = [site(i, tags=["canary"] if i < 3 else []) for i in range(1, 11)]
    plan = assign_cohorts(plan_of(sites, [upd(i) for i in range(1, 11)]),
                          parse_policy({"rollout": {"cohorts": ["tag:canary", "rest"], "failure_budget": 0}}).rollout)
    base = dict(site_url="u", site_name="n", type=P, slug="s", name="s")
    items = [Item(site_id=1, outcome=Outcome.updated, **base), Item(site_id=2, outcome=Outcome.unchanged, **base)]
    failures = failed_sites(items, {1: HealthCheck(online=True), 2: HealthCheck(online=True)})
    assert failures == {2}
    verdict = judge_cohort(plan.cohorts[0], len(failures))
    assert verdict.status == "stopped" and "1 failed site, over the failure budget of 0" in verdict.reason
    later = stop_cohorts(plan, plan.cohorts[1:], verdict)
    assert [(c.name, c.status, c.sites) for c in later] == [("rest", "not_started", 8)]
    stopped = [i for i in plan.items if i.site_id > 2]
    assert all(i.decision is Decision.excluded and "cohort 'tag:canary'" in i.reason for i in stopped)
    assert failed_sites([], {3: HealthCheck(probe_ok=False)}) == {3}
    assert failed_sites([], {3: HealthCheck(probe_ok=False, before_ok=False)}) == set()  # it was down before
    assert judge_cohort(plan.cohorts[0], 0).status == "completed"


def test_first_seen_store_keeps_the_first_date(tmp_path: Path):
    store = FirstSeenStore(tmp_path / "state.sqlite")
    key = ("plugin", "akismet/akismet.php", "5.0.1")
    assert store.record([key], date(2026, 11, 1)) == {key: date(2026, 11, 1)}
    other = ("theme", "twentyfour", "1.1")
    assert store.record([key, other], date(2026, 11, 5)) == {key: date(2026, 11, 1), other: date(2026, 11, 5)}


def test_job_journal_lists_open_jobs_young_enough(tmp_path: Path):
    journal = JobJournal(tmp_path / "state.sqlite")
    now = datetime.now(UTC)
    journal.record(JournalEntry(job_id="update_a", run_id="r", kind="update", type=P, started_at=now,
                                site_ids=[1, 2], slugs=["akismet/akismet.php"]))
    journal.record(JournalEntry(job_id="update_old", run_id="r", kind="update", type=P,
                                started_at=now - timedelta(hours=5), site_ids=[3]))
    journal.record(JournalEntry(job_id="sync_b", run_id="r", kind="sync", started_at=now, site_ids=[1]))
    assert [e.job_id for e in journal.open_jobs("update")] == ["update_a"]
    assert journal.open_jobs("update")[0].slugs == ["akismet/akismet.php"]
    journal.finish("update_a")
    assert journal.open_jobs("update") == []


def test_items_covered_by_a_running_journalled_job_are_not_sent_again(tmp_path: Path):
    from fleet.rules.plan import PlanItem
    from fleet.state.job_journal import reuse_running_jobs

    journal = JobJournal(tmp_path / "state.sqlite")
    journal.record(JournalEntry(job_id="update_1", run_id="crashed", kind="update", type=C,
                                started_at=datetime.now(UTC), site_ids=[1, 2], slugs=["wordpress"]))
    items = [PlanItem(site_id=i, type=C, slug="wordpress", decision=Decision.apply) for i in (1, 3)]
    reused, remaining = reuse_running_jobs(items, C, journal)
    assert [(r.job_id, r.reused, r.call.site_ids) for r in reused] == [("update_1", True, [1])]
    assert [i.site_id for i in remaining] == [3]
    assert reuse_running_jobs(items, P, journal) == ([], items)
