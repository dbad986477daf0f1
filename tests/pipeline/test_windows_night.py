"""Windows, blackouts, rehearsals and the approval gate in real runs, over HTTP against the emulator."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterStartTime,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.flow_runs import aresume_flow_run
from prefect.settings import PREFECT_API_URL

from cli.commands.approve import waiting_items
from fleet.model.summary import Outcome
from fleet.rules.plan import Decision, SiteRecord
from flows.update import update_fleet
from reporting.run_report import render_reports
from tests.pipeline.conftest import installed, memory_of, read_run

pytestmark = pytest.mark.usefixtures("prefect_harness")
FLEET = Path(sys.executable).with_name("fleet")


def groups(sites: list[SiteRecord], client: str, tag: str) -> dict[str, set[int]]:
    """The policy's precedence, written out: the client's window, else the tag's, else the default."""
    found: dict[str, set[int]] = {"client": set(), "tag": set(), "default": set()}
    for site in sites:
        kind = "client" if site.client == client else "tag" if tag in site.tags else "default"
        found[kind].add(site.id)
    return found


def write_policy(tmp_path: Path, policy: dict) -> str:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return str(path)


async def test_rehearsals_at_three_moments_pick_exactly_the_sites_in_their_windows(dashboard, tmp_path):
    dashboard(sites=40, seed=4)
    first, plan = read_run(await update_fleet(dry_run=True))
    sites = plan.sites
    client = next(site.client for site in sites if site.client)
    tag = next(tag for site in sites for tag in site.tags if site.client != client)
    policy = write_policy(tmp_path, {
        "windows": {"default": {"timezone": "UTC", "hours": "00:00-06:00"},
                    "tags": {tag: {"timezone": "Europe/Berlin", "hours": "01:00-04:00",
                                   "days": ["mon", "tue", "wed", "thu", "fri"]}},
                    "clients": {client: {"timezone": "America/New_York", "hours": "02:00-05:00"}}},
        "blackouts": [{"from": "2026-12-24", "to": "2026-12-26", "reason": "holidays"},
                      {"from": "2026-11-27", "to": "2026-11-30", "clients": [client], "reason": "Black Friday"}],
    })
    group = groups(sites, client, tag)
    assert all(group.values()), group
    expected = {  # worked out by hand: Berlin leaves summer time on 25 Oct 2026, New York on 1 Nov
        "2026-10-23T02:30:00Z": group["default"],  # Berlin 04:30 CEST: closed; New York 22:30: closed
        "2026-10-26T02:30:00Z": group["default"] | group["tag"],  # Berlin 03:30 CET: open
        "2026-11-27T07:30:00Z": set(),  # New York 02:30 but Black Friday; Berlin and UTC closed
    }
    for moment, open_sites in expected.items():
        summary, plan = read_run(await update_fleet(dry_run=True, policy_file=policy,
                                                    at=datetime.fromisoformat(moment)))
        assert summary.planned_for == datetime.fromisoformat(moment)
        assert {site.site_id for site in summary.sites if site.deferred is None} == open_sites, moment
        deferred = [item for item in summary.items if item.site_id not in open_sites and item.outcome
                    is not Outcome.ignored]
        assert deferred and {item.outcome for item in deferred} == {Outcome.deferred}
        assert all(item.opens_at is not None and item.opens_at > datetime.fromisoformat(moment) for item in deferred)
    black_friday = {site.site_id: site.deferred for site in summary.sites}
    assert {black_friday[i] for i in group["client"]} == {"blackout: Black Friday"}
    assert first.planned_for is None


async def test_a_write_run_refuses_a_rehearsal_moment(dashboard):
    emulator = dashboard(sites=5, seed=4)
    with pytest.raises(ValueError, match="dry run"):
        await update_fleet(at=datetime(2026, 12, 24, 2, tzinfo=UTC))
    assert not emulator.writes()


async def test_an_hourly_write_run_touches_only_the_sites_inside_their_window(dashboard, tmp_path):
    emulator = dashboard(sites=30, seed=6)
    sites = read_run(await update_fleet(dry_run=True))[1].sites
    tag = next(tag for site in sites for tag in site.tags)
    now = datetime.now(UTC)
    hours = lambda start, end: f"{start:%H:%M}-{end:%H:%M}"  # noqa: E731
    policy = write_policy(tmp_path, {"windows": {
        "default": {"timezone": "UTC", "hours": hours(now + timedelta(hours=3), now + timedelta(hours=4))},
        "tags": {tag: {"timezone": "Asia/Tokyo", "hours": hours((now - timedelta(hours=1)).astimezone(
            _tokyo()), (now + timedelta(hours=1)).astimezone(_tokyo()))}},
    }})
    inside = {site.id for site in sites if tag in site.tags}
    before = emulator.truth()
    summary_path = await update_fleet(policy_file=policy)
    summary, plan = read_run(summary_path)
    truth = emulator.truth()
    applied = [item for item in plan.items if item.decision is Decision.apply]
    assert applied and {item.site_id for item in applied} <= inside
    for item in summary.items:
        if item.site_id not in inside and item.outcome is not Outcome.ignored:
            assert item.outcome is Outcome.deferred and "outside its maintenance window" in item.reason
            assert installed(truth, item.site_id, item.type, item.slug) == installed(
                before, item.site_id, item.type, item.slug)
    outside = [s for s in sites if s.id not in inside]
    assert all(truth["sites"][str(s.id)]["last_sync"] == before["sites"][str(s.id)]["last_sync"] for s in outside)
    rendered = render_reports(Path(summary_path).parent)
    text = rendered.path(rendered.operator, ".txt").read_text()
    assert "Not touched tonight: maintenance windows" in text and "next opening" in text
    assert f"{len(outside)} sites: outside its maintenance window (" in text
    html = rendered.path(rendered.operator, ".html").read_text()
    assert html.count('data-row="window-group"') == 1
    again, _ = read_run(await update_fleet(policy_file=policy))  # the next hourly run, same window day
    reasons = {site.deferred for site in again.sites if site.site_id in inside}
    assert len(reasons) == 1 and next(iter(reasons)).startswith("already maintained in this window (it opened ")
    assert all(site.opens_at is not None for site in again.sites if site.site_id in inside)  # the next window


def _tokyo():
    from zoneinfo import ZoneInfo

    return ZoneInfo("Asia/Tokyo")


async def _paused_run(night: asyncio.Task):
    """The flow run that `night` paused for approval, as soon as the server says so: a run paused since this call
    (the night's task has not begun yet when it is made), never one an earlier test on this worker's server left
    paused. No deadline of its own (a busy machine once took longer than the 60 s it had): the test's timeout
    bounds it, and a night that ends without pausing fails at once, with what it returned or raised."""
    since = datetime.now(UTC) - timedelta(seconds=1)  # the server's clock is this machine's; a second for rounding
    async with get_client() as client:
        while not night.done():
            runs = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED])),
                start_time=FlowRunFilterStartTime(after_=since)))
            runs = [run for run in runs if run.state and run.state.state_details.run_input_keyset]
            if runs:
                assert len(runs) == 1, f"more than one night paused: {[run.name for run in runs]}"
                return runs[0]
            await asyncio.sleep(0.25)
    raise AssertionError(f"the night ended without pausing for approval: {night.result()!r}")


def approval_policy(tmp_path: Path, slug: str, timeout: str = "5m") -> str:
    return write_policy(tmp_path, {"approval": {"items": [slug], "timeout": timeout}})


def waiting_slug(plan) -> str:
    return next(item.slug for item in plan.items if item.decision is Decision.apply and item.type.value == "plugin")


async def test_the_gate_pauses_is_approved_through_prefect_and_applies_the_item(dashboard, tmp_path):
    emulator = dashboard(sites=12, seed=8)
    slug = waiting_slug(read_run(await update_fleet(dry_run=True))[1])
    night = asyncio.create_task(update_fleet(policy_file=approval_policy(tmp_path, slug)))
    run = await _paused_run(night)
    truth = emulator.truth()
    notice = (tmp_path / "reports" / "alerts" / f"approval-{run.id}.eml").read_text()
    assert "waits for a person until" in notice and f"fleet approve {run.id} --all" in notice and slug in notice
    rows = await waiting_items(run.id)
    assert any(row["item"].endswith(f":{slug}") for row in rows)
    for row in rows:
        row["approve"] = True
    await aresume_flow_run(run.id, run_input={"items": rows, "approve_all": False, "approved_by": "Ada"})
    summary, plan = read_run(await night)
    gated = [item for item in summary.items if item.slug == slug]
    assert gated and {item.outcome for item in gated} == {Outcome.updated}
    assert {item.approved_by for item in gated} == {"Ada"} and {item.cohort for item in gated} == {"approved"}
    assert any(installed(truth, i.site_id, i.type, i.slug) == i.from_version for i in gated)  # not before the gate
    assert summary.approval.approved == len(gated) and summary.approval.answered_by == "Ada"
    rendered = render_reports(Path(night.result()).parent)
    n = len(gated)
    said = (f"{n} of {n} update{'' if n == 1 else 's'} that needed approval {'was' if n == 1 else 'were'} approved "
            "by Ada")
    assert said in rendered.path(
        rendered.operator, ".txt").read_text()
    assert {item.outcome for item in summary.items if item.slug != slug and item.rule is None} <= {Outcome.updated}


async def test_an_unanswered_gate_times_out_and_applies_nothing(dashboard, tmp_path):
    emulator = dashboard(sites=12, seed=8)
    slug = waiting_slug(read_run(await update_fleet(dry_run=True))[1])
    summary, _ = read_run(await update_fleet(policy_file=approval_policy(tmp_path, slug, timeout="2s")))
    gated = [item for item in summary.items if item.slug == slug]
    assert gated and {item.outcome for item in gated} == {Outcome.held}
    assert all(item.reason.startswith("no approval before the timeout") for item in gated)
    truth = emulator.truth()
    assert all(installed(truth, i.site_id, i.type, i.slug) == i.from_version for i in gated)
    assert summary.approval.timed_out and summary.approval.approved == 0


async def test_fleet_approve_answers_the_gate_from_a_terminal(dashboard, tmp_path):
    dashboard(sites=12, seed=8)
    slug = waiting_slug(read_run(await update_fleet(dry_run=True))[1])
    night = asyncio.create_task(update_fleet(policy_file=approval_policy(tmp_path, slug)))
    run = await _paused_run(night)
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}
    wrong = await asyncio.to_thread(subprocess.run, [str(FLEET), "approve", str(run.id), "--item", "9999:nothing"],
                                    env=env, capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and "not waiting for approval: 9999:nothing" in wrong.stderr
    done = await asyncio.to_thread(subprocess.run, [str(FLEET), "approve", str(run.id), "--all", "--by", "Grace"],
                                   env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "approved" in done.stdout and "Traceback" not in done.stderr
    summary, _ = read_run(await night)
    gated = [item for item in summary.items if item.slug == slug]
    assert gated and {(item.outcome, item.approved_by) for item in gated} == {(Outcome.updated, "Grace")}


async def test_an_approval_asked_for_as_the_gate_opens_waits_for_its_form() -> None:
    """Prefect saves the gate's form only after the run turns Paused: `fleet approve` (and the tests) asked in
    between read a 404 (a full suite's test failed on it); now the form is waited for, and a form that never comes
    is said to be missing."""
    from prefect.input.run_input import keyset_from_paused_state
    from prefect.states import Cancelled, Paused, Running

    @flow
    def gate() -> None:
        """Only a flow to make runs of."""

    rows = [{"site": "7 granite.example", "item": "plugin:akismet", "approve": False}]
    async with get_client() as client:
        runs = []
        for _ in range(2):
            run = await client.create_flow_run(gate)
            await client.set_flow_run_state(run.id, Running(), force=True)
            paused = Paused(timeout_seconds=300, pause_key="1")
            paused.state_details.run_input_keyset = keyset_from_paused_state(paused)
            await client.set_flow_run_state(run.id, paused, force=True)
            runs.append((run.id, paused.state_details.run_input_keyset))
        (waiting, keyset), (formless, _) = runs
        reading = asyncio.create_task(waiting_items(waiting))
        await asyncio.sleep(0.6)
        assert not reading.done(), reading.exception() if reading.done() else None
        await client.create_flow_run_input(waiting, keyset["schema"],
                                           json.dumps({"properties": {"items": {"default": rows}}}))
        assert await reading == rows
        with pytest.raises(LookupError, match="paused for approval, but its form was not saved within 0.5 s"):
            await waiting_items(formless, patience=0.5)
        for run_id in (waiting, formless):  # no paused run left for a later test on this worker's server
            await client.set_flow_run_state(run_id, Cancelled(), force=True)


async def test_a_window_that_closed_during_the_night_stops_new_calls_for_its_sites(dashboard, tmp_path):
    from fleet.model.settings import PipelineSettings
    from fleet.rules.plan import PlanCohort
    from flows.sync import open_dashboard
    from flows.update import Night, run_cohort

    emulator = dashboard(sites=10, seed=3)
    _, plan = read_run(await update_fleet(dry_run=True))
    with_work = sorted({item.site_id for item in plan.items if item.decision is Decision.apply})
    late, on_time = with_work[0], with_work[1]
    now = datetime.now(UTC)
    plan.sites = [site.model_copy(update={"window_closes_at": now - timedelta(minutes=1) if site.id == late
                                          else now + timedelta(hours=1)}) for site in plan.sites]
    settings = PipelineSettings(chunk_size=1).with_memory(memory_of())  # a lane per site
    before = emulator.truth()

    @flow
    async def one_cohort():  # the cohort's steps, as a night runs them: in a flow run
        async with await open_dashboard(None, settings) as client:
            return await run_cohort(client, plan, PlanCohort(name="all", site_ids=[late, on_time]), settings,
                                    False, Night("window-test", settings.call_sizer()))

    result = await one_cohort()
    outcomes = {(item.site_id, item.outcome) for item in result.items}
    assert {outcome for site, outcome in outcomes if site == late} == {Outcome.deferred}
    assert Outcome.updated in {outcome for site, outcome in outcomes if site == on_time}
    assert all("window closed before it was reached" in item.reason for item in result.items if item.site_id == late)
    truth = emulator.truth()
    assert truth["sites"][str(late)]["last_sync"] == before["sites"][str(late)]["last_sync"]
    assert all(installed(truth, i.site_id, i.type, i.slug) == installed(before, i.site_id, i.type, i.slug)
               for i in result.items if i.site_id == late)
