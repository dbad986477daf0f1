"""The nightly flow end to end, over real HTTP against the emulator, checked against its ground truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.client import DashboardClient
from dashboard.errors import InvalidInput
from fleet.model.summary import NOT_ATTEMPTED, Outcome, Selection, UpdateType
from fleet.rules.breakage import SitesBrokenByRun
from fleet.rules.plan import Decision
from flows.nightly import nightly_maintenance
from flows.update import update_fleet
from tests.pipeline.conftest import installed, read_run, still_pending

pytestmark = pytest.mark.usefixtures("prefect_harness")


def keys(items) -> list[tuple[int, str, str]]:
    return [(item.site_id, item.type.value, item.slug) for item in items]


def assert_every_item_accounted(summary, plan) -> None:
    assert sorted(keys(summary.items)) == sorted(keys(plan.items))
    assert len(set(keys(summary.items))) == len(summary.items)
    assert sum(summary.counts.by_outcome.values()) == len(summary.items)


def assert_truth_agrees(summary, truth) -> None:
    """Updated items are installed at their new version; items not attempted were never touched."""
    for item in summary.items:
        now = installed(truth, item.site_id, item.type, item.slug)
        if item.outcome is Outcome.updated:
            assert not still_pending(truth, item.site_id, item.type, item.slug), item
            if item.type is not UpdateType.translation:
                assert now == item.to_version, item
        elif item.outcome in NOT_ATTEMPTED and item.from_version and item.type is not UpdateType.translation:
            assert now == item.from_version, item


async def test_nightly_over_60_sites_updates_everything_planned(dashboard):
    emulator = dashboard(sites=60, seed=3)
    summary, plan = read_run(await nightly_maintenance(selection=Selection()))
    assert_every_item_accounted(summary, plan)
    applied = {key for key, item in zip(keys(plan.items), plan.items, strict=True) if item.decision is Decision.apply}
    assert applied, "the generated fleet has pending updates"
    outcomes = {key: item.outcome for key, item in zip(keys(summary.items), summary.items, strict=True)}
    assert {outcomes[key] for key in applied} == {Outcome.updated}
    truth = emulator.truth()
    assert_truth_agrees(summary, truth)
    ignored = [item for item in summary.items if item.outcome is Outcome.ignored]
    assert ignored and all(item.rule == "ignore_list" for item in ignored)
    assert all(site.check is not None for site in summary.sites if site.updated)
    unusable = {site.site_id for site in summary.sites if site.status != "online"}
    on_unusable = {item.outcome for item in summary.items if item.site_id in unusable}
    assert on_unusable <= {Outcome.skipped, Outcome.ignored}


@pytest.mark.long(20)
async def test_over_450_sites_the_batch_jobs_queue_and_the_sensor_waits(dashboard, monkeypatch):
    emulator = dashboard(sites=450, seed=5)
    monkeypatch.setenv("FLEET_SITES_PER_CALL", "1000")  # prefer batch jobs to calls of at most 200 sites
    summary, plan = read_run(await nightly_maintenance(selection=Selection(types=[UpdateType.core])))
    assert summary.jobs, "a call over more than 200 sites must have queued"
    for job in summary.jobs:
        assert job.sites > 200 and job.status == "completed" and job.polls >= 2 and job.reason is None
    core = [item for item in summary.items if item.type is UpdateType.core and item.rule is None]
    assert core and {item.outcome for item in core} == {Outcome.updated}
    others = {item.outcome for item in summary.items if item.type is not UpdateType.core}
    assert others <= {Outcome.excluded, Outcome.skipped, Outcome.ignored}
    assert_every_item_accounted(summary, plan)
    assert_truth_agrees(summary, emulator.truth())


async def test_realistic_faults_every_item_accounted(dashboard, tmp_path: Path):
    emulator = dashboard(sites=80, seed=11, faults="realistic")
    truth = emulator.truth()
    sites = truth["sites"]
    online = [s for s in sites.values() if s["status"] == "connected" and s["pending_updates"]]
    silent_site, failing_site, offline_site = online[0], online[1], online[2]
    silent = next(u for u in silent_site["pending_updates"] if u["type"] == "plugin")
    failing = next(u for u in failing_site["pending_updates"] if u["type"] == "plugin")
    emulator.post("faults/items", {"site_id": silent_site["id"], "type": "plugin", "slug": silent["slug"],
                                   "mode": "silent"})
    emulator.post("faults/items", {"site_id": failing_site["id"], "type": "plugin", "slug": failing["slug"],
                                   "mode": "fail"})
    emulator.post("faults/reachable", {"site_id": offline_site["id"], "reachable": False})
    policy = tmp_path / "policy.yaml"
    policy.write_text("holds:\n  - {item: woocommerce, reason: checkout freeze}\n")

    try:
        path = await nightly_maintenance(selection=Selection(), policy_file=str(policy))
    except SitesBrokenByRun as broken:  # the realistic profile breaks a site now and then
        path = broken.summary_path
    summary, plan = read_run(path)

    assert_every_item_accounted(summary, plan)
    assert_truth_agrees(summary, emulator.truth())
    by_key = {key: item for key, item in zip(keys(summary.items), summary.items, strict=True)}
    silent_item = by_key[(silent_site["id"], "plugin", silent["slug"])]
    if "answer was lost" in (silent_item.reason or ""):  # the profile's 502/504 hid the dashboard's "success"
        assert silent_item.outcome is Outcome.failed and "still not installed" in silent_item.reason
    else:  # the dashboard said it was updated, and it was not
        assert silent_item.outcome is Outcome.unchanged, silent_item
    assert by_key[(failing_site["id"], "plugin", failing["slug"])].outcome is Outcome.failed
    assert {item.outcome for item in summary.items if item.site_id == offline_site["id"]} <= {
        Outcome.skipped, Outcome.ignored}
    held = [item for item in summary.items if item.outcome is Outcome.held and item.rule != "broken_tonight"]
    assert held and all(item.reason == "held: checkout freeze" for item in held)  # the rest: tonight's breaks


async def test_dry_run_sends_no_write_request(dashboard):
    emulator = dashboard(sites=30, seed=2)
    before = emulator.writes()
    summary, plan = read_run(await nightly_maintenance(selection=Selection(), dry_run=True))
    assert emulator.writes() == before
    assert summary.dry_run and summary.jobs == []
    would = [item for item in summary.items if item.rule == "dry_run"]
    assert len(would) == len(plan.to_apply()) > 0
    assert all(item.outcome is Outcome.excluded and item.reason.startswith("dry run: would update") for item in would)


def lower_threshold(emulator, monkeypatch, sites: int) -> None:
    """Make calls over more than `sites` sites queue, so a small fleet exercises the batch jobs."""
    emulator.post("options", {f"{emulator.server.config.namespace}_abilities_batch_threshold": sites})
    monkeypatch.setenv("FLEET_BATCH_THRESHOLD", str(sites))
    monkeypatch.setenv("FLEET_SITES_PER_CALL", "1000")


@pytest.mark.long(25)
async def test_interrupted_run_then_rerun_refires_nothing(dashboard, monkeypatch):
    emulator = dashboard(sites=80, seed=7, time_scale=0.05)
    lower_threshold(emulator, monkeypatch, 10)
    monkeypatch.setenv("FLEET_JOB_DEADLINE_SECONDS", "6")  # modelled: the first run gives up while its job runs
    # WP-Cron held from the first run's job until the second run asks after it: however long the runs take to
    # start, the job is still unfinished when the second run finds it (its first chunk is due 60 s after queueing)
    emulator.post("cron", {"held": True})
    first, _ = read_run(await update_fleet(selection=Selection(types=[UpdateType.core])))
    assert [job.status for job in first.jobs] == ["deadline"]
    waiting = [item for item in first.items if item.outcome is Outcome.unknown]
    assert waiting and all("batch job" in item.reason for item in waiting)
    jobs_before = emulator.truth()["jobs"]
    asked = []
    original = DashboardClient.job_status

    async def release_cron_when_asked(self, job_id):
        status = await original(self, job_id)
        if not asked:
            asked.append(status.status)
            emulator.post("cron", {"held": False})
        return status

    monkeypatch.setattr(DashboardClient, "job_status", release_cron_when_asked)
    monkeypatch.setenv("FLEET_JOB_DEADLINE_SECONDS", "1200")
    second, second_plan = read_run(await update_fleet(selection=Selection(types=[UpdateType.core])))
    assert asked and asked[0] != "completed", "the second run found the first run's job unfinished"
    assert emulator.truth()["jobs"] == jobs_before, "no second update job was queued"
    assert [job.id for job in second.jobs] == [job.id for job in first.jobs]
    assert {item.outcome for item in second.items if item.type is UpdateType.core and item.rule is None} == {
        Outcome.updated}
    updated_first = {(i.site_id, i.slug) for i in first.items if i.outcome is Outcome.updated}
    assert not updated_first & {(i.site_id, i.slug) for i in second_plan.items}


async def test_failing_canary_cohort_stops_the_rollout(dashboard, tmp_path: Path):
    emulator = dashboard(sites=40, seed=13)
    truth = emulator.truth()
    canary = next(s for s in truth["sites"].values() if s["status"] == "connected"
                  and any(u["type"] == "plugin" for u in s["pending_updates"]))
    broken = next(u for u in canary["pending_updates"] if u["type"] == "plugin")
    emulator.post("faults/items", {"site_id": canary["id"], "type": "plugin", "slug": broken["slug"], "mode": "fail"})
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[rollout]\ncohorts = ["site:{canary["id"]}", "rest"]\nfailure_budget = 0\n')

    summary, plan = read_run(await nightly_maintenance(selection=Selection(), policy_file=str(policy)))

    assert [(c.name, c.status) for c in summary.cohorts] == [(f"site:{canary['id']}", "stopped"),
                                                              ("rest", "not_started")]
    assert "failure budget" in summary.cohorts[0].reason
    rest = [item for item in summary.items if item.rule == "rollout"]
    assert rest and all(item.outcome is Outcome.excluded and "cohort" in item.reason for item in rest)
    assert {item.site_id for item in summary.items if item.outcome is Outcome.updated} <= {canary["id"]}
    assert_truth_agrees(summary, emulator.truth())
    assert_every_item_accounted(summary, plan)


@pytest.mark.parametrize(
    ("faults", "stall_after", "night_clock", "ending", "words"),
    [
        ({"stuck_job_rate": 1.0}, "1", None, "never_started", "WP-Cron"),
        # on one clock the sensor's deadline (3.5 h) always comes before the dashboard's 4 h job timeout: to see
        # the dashboard's own verdict, the night waits in real seconds while the emulator's hours pass
        ({"slow_job_rate": 1.0}, "30", "1", "failed", "timed out"),
    ],
)
async def test_stuck_and_timed_out_jobs_end_with_clear_reasons(dashboard, tmp_path: Path, monkeypatch, faults,
                                                              stall_after, night_clock, ending, words):
    profile = tmp_path / "faults.yaml"
    profile.write_text("".join(f"{name}: {value}\n" for name, value in faults.items()))
    emulator = dashboard(sites=80, seed=17, time_scale=0.0002, faults=str(profile))
    lower_threshold(emulator, monkeypatch, 10)
    monkeypatch.setenv("FLEET_STALL_AFTER_SECONDS", stall_after)
    if night_clock:
        monkeypatch.setenv("FLEET_TIME_SCALE", night_clock)
    summary, plan = read_run(await update_fleet(selection=Selection(types=[UpdateType.core])))
    assert summary.jobs and {job.status for job in summary.jobs} == {ending}
    assert all(words in (job.reason or "") for job in summary.jobs)
    waited = [item for item in summary.items if item.type is UpdateType.core and item.rule is None
              and item.outcome is not Outcome.updated]
    assert waited and {item.outcome for item in waited} == {Outcome.unknown}
    assert all(words in item.reason for item in waited)
    assert_every_item_accounted(summary, plan)


async def test_an_update_that_breaks_a_site_fails_its_health_check(dashboard, tmp_path):
    emulator = dashboard(sites=12, seed=4)
    policy = tmp_path / "policy.yaml"
    policy.write_text("contain: report\n")  # left broken (by default the night would contain it)
    sites = emulator.truth()["sites"]
    site = next(
        s for s in sites.values()
        if s["status"] == "connected" and s["reachable"] and any(u["type"] == "plugin" for u in s["pending_updates"])
    )
    plugin = next(u for u in site["pending_updates"] if u["type"] == "plugin")
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": plugin["slug"], "mode": "break"})

    with pytest.raises(SitesBrokenByRun) as broke:
        await nightly_maintenance(selection=Selection(), send_report=False, policy_file=str(policy))
    summary, _ = read_run(broke.value.summary_path)

    assert emulator.truth()["sites"][str(site["id"])]["front_end"]["status"] == "broken"
    checks = {s.site_id: s.check for s in summary.sites if s.updated}
    broken = checks[site["id"]]
    assert broken is not None and broken.probe_ok is False and "critical error" in (broken.probe_error or "")
    healthy = [check for site_id, check in checks.items() if site_id != site["id"]]
    assert healthy and all(check is not None and check.probe_ok for check in healthy)


async def test_a_lane_whose_step_fails_accounts_for_its_items_and_the_others_carry_on(dashboard, monkeypatch):
    dashboard(sites=60, seed=3)
    monkeypatch.setenv("FLEET_CHUNK_SIZE", "20")
    import fleet.rules.reconcile

    reconcile = fleet.rules.reconcile.reconcile
    broken: set[int] = set()

    def failing_for_one_lane(items, sites, *args):
        if not broken:
            broken.update(sites)
        if set(sites) == broken:
            raise InvalidInput("the fresh list could not be read", code="bad_listing")
        return reconcile(items, sites, *args)

    monkeypatch.setattr(fleet.rules.reconcile, "reconcile", failing_for_one_lane)
    summary, plan = read_run(await update_fleet(selection=Selection()))

    assert_every_item_accounted(summary, plan)
    assert len(plan.to_apply()) > 0 and len({item.site_id for item in plan.to_apply()}) > 40  # three lanes
    attempted = [item for item in summary.items if item.rule is None]
    lost = [item for item in attempted if item.site_id in broken]
    assert lost and all(item.outcome is Outcome.unknown and "could not verify" in item.reason for item in lost)
    assert {item.outcome for item in attempted if item.site_id not in broken} == {Outcome.updated}
    assert [error for error in summary.errors if "a step failed" in error and "lane" in error]


async def test_the_policy_can_ask_for_checks_of_every_site_with_planned_work(dashboard, tmp_path: Path):
    checked = {}
    for check_all in (False, True):  # the same fleet twice: one night each way
        emulator = dashboard(sites=10, seed=6)
        truth = emulator.truth()
        untouched, updated = [site for site in truth["sites"].values() if site["status"] == "connected"
                              and site["reachable"] and not site["suspended"]
                              and {u["type"] for u in site["pending_updates"]} == {"plugin"}][:2]
        for update in untouched["pending_updates"]:  # every call for this site fails outright: nothing applied
            emulator.post("faults/items", {"site_id": untouched["id"], "type": "plugin", "slug": update["slug"],
                                           "mode": "fail"})
        policy = tmp_path / f"policy-{check_all}.yaml"
        policy.write_text(f"check_all_sites: {str(check_all).lower()}\n")
        selection = Selection(sites=[str(untouched["id"]), str(updated["id"])], types=[UpdateType.plugin])
        summary, _ = read_run(await nightly_maintenance(selection=selection, policy_file=str(policy),
                                                        send_report=False))
        checked[check_all] = {site.site_id for site in summary.sites if site.check is not None}
    assert checked[False] == {updated["id"]}, "by default only a site something was applied to is checked"
    assert checked[True] == {untouched["id"], updated["id"]}
