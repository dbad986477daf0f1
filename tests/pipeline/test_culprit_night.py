"""A night that breaks a site contains it: the culprit found by bisection and left deactivated, the innocent
plugins updated; a site whose MainWP Child died is alerted at once. Over real HTTP against the emulator."""

from __future__ import annotations

import email
import email.policy
from datetime import datetime
from pathlib import Path

import pytest

from dashboard.client import DashboardClient
from dashboard.errors import ServerError
from fleet.model.summary import ContainmentStatus, Outcome, Selection, Summary
from fleet.state.holds import HoldStore
from flows.nightly import nightly_maintenance
from tests.pipeline.conftest import memory_of

pytestmark = pytest.mark.usefixtures("prefect_harness")


def three_plugin_site(truth: dict) -> tuple[dict, list[str], str]:
    """A healthy connected site with at least three active plugins offered an update, those plugins, and one of
    them (not the first) whose version is offered to another site too (to see the hold the next night)."""
    offered = [(site["id"], u["slug"], u["new_version"]) for site in truth["sites"].values()
               for u in site["pending_updates"] if u["type"] == "plugin"]
    for site in truth["sites"].values():
        if site["status"] != "connected" or not site["reachable"]:
            continue
        active = [u["slug"] for u in site["pending_updates"]
                  if u["type"] == "plugin" and site["plugins"][u["slug"]]["active"]]
        versions = {u["slug"]: u["new_version"] for u in site["pending_updates"]}
        shared = [slug for slug in active[1:] if any(
            other != site["id"] and (slug, versions[slug]) == (s, v) for other, s, v in offered)]
        if len(active) >= 3 and shared:
            return site, active, shared[0]
    raise AssertionError("no site with three active plugins to update")


def other_site_offered(truth: dict, slug: str, version: str, besides: int) -> dict:
    return next(site for site in truth["sites"].values()
                if site["id"] != besides and site["status"] == "connected" and site["reachable"]
                and any(u["slug"] == slug and u["new_version"] == version for u in site["pending_updates"]))


async def run_night(site_ids: list[int], tmp_path: Path, name: str, policy: str | None = None) -> Summary:
    """One night over the sites; every night of a test shares its report directory (and so the nights' memory)."""
    policy_file = ""
    if policy is not None:
        (tmp_path / f"{name}.yaml").write_text(policy)
        policy_file = str(tmp_path / f"{name}.yaml")
    state = await nightly_maintenance(selection=Selection(sites=[str(i) for i in site_ids]), policy_file=policy_file,
                                      report_dir=str(tmp_path / "reports"), return_state=True)
    result = await state.result(raise_on_failure=False)
    return Summary.read(Path(result if isinstance(result, str) else result.summary_path))


async def test_of_three_updated_plugins_the_bad_one_is_found_deactivated_and_held_the_others_stay_updated(
    dashboard, tmp_path: Path
):
    emulator = dashboard(sites=12, seed=4)
    truth = emulator.truth()
    site, plugins, bad = three_plugin_site(truth)
    version = next(u["new_version"] for u in site["pending_updates"] if u["slug"] == bad)
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": bad, "mode": "break"})

    summary = await run_night([site["id"]], tmp_path, "first")

    after = emulator.truth()["sites"][str(site["id"])]
    assert after["front_end"]["broken"] is False  # the site answers again
    assert [slug for slug in plugins if not after["plugins"][slug]["active"]] == [bad]  # exactly the culprit is off
    items = {item.slug: item for item in summary.items if item.site_id == site["id"]}
    for slug in plugins:
        assert items[slug].outcome is Outcome.updated
        assert after["plugins"][slug]["version"] == items[slug].to_version  # the innocent ones stay updated too
    [alarm] = summary.broken
    contained = alarm.containment
    assert contained.status is ContainmentStatus.contained and contained.culprit.slug == bad
    assert contained.headline == f"broken, then contained: {items[bad].name} deactivated"
    assert 1 <= contained.rounds <= 3 and [s.slug for s in alarm.suspects] == [bad]
    assert "critical error" in alarm.saw
    assert [item.slug for item in summary.items if item.suspect] == [bad]
    holds = HoldStore(memory_of()).active()
    assert [(hold.slug, hold.version) for hold in holds] == [(bad, version)]
    raw = (tmp_path / "reports" / summary.run_id / "summary.json").read_text()
    assert '"rounds": ' in raw and '"status": "contained"' in raw
    reports = tmp_path / "reports" / summary.run_id / "report"
    operator = (reports / "operator.txt").read_text()
    assert contained.headline in operator and f"restore version {items[bad].from_version}" in operator
    client = next(path for path in reports.glob("*.txt") if path.name != "operator.txt"
                  and site["url"].rstrip("/") in path.read_text())
    for report in (client, client.with_suffix(".md"), client.with_suffix(".html")):  # every format says it
        assert contained.headline in report.read_text() and "brought back at once" in report.read_text()

    other = other_site_offered(emulator.truth(), bad, version, site["id"])
    second = await run_night([other["id"]], tmp_path, "second")
    [held] = [item for item in second.items if item.slug == bad]
    assert held.outcome is Outcome.held and held.rule == "night_hold"
    assert emulator.truth()["sites"][str(other["id"])]["plugins"][bad]["version"] != version


async def test_contain_report_deactivates_nothing_and_never_deactivate_is_honoured(dashboard, tmp_path: Path):
    emulator = dashboard(sites=12, seed=4)
    truth = emulator.truth()
    site, plugins, _ = three_plugin_site(truth)
    bad = plugins[0]
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": bad, "mode": "break"})

    summary = await run_night([site["id"]], tmp_path, "report", policy="contain: report\n")

    after = emulator.truth()["sites"][str(site["id"])]
    assert after["front_end"]["broken"] is True and all(after["plugins"][slug]["active"] for slug in plugins)
    [alarm] = summary.broken
    assert alarm.containment.status is ContainmentStatus.reported and "contain: report" in alarm.containment.detail
    assert {s.slug for s in alarm.suspects} >= set(plugins)  # no culprit found: every applied one is a suspect
    writes = emulator.writes()
    assert not [call for call in writes if "activate-site-plugins" in call]


async def test_a_protected_culprit_is_never_deactivated(dashboard, tmp_path: Path):
    emulator = dashboard(sites=12, seed=4)
    site, plugins, _ = three_plugin_site(emulator.truth())
    bad = plugins[-1]
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": bad, "mode": "break"})
    folder = bad.split("/")[0]

    summary = await run_night([site["id"]], tmp_path, "guarded", policy=f"never_deactivate: [{folder}]\n")

    after = emulator.truth()["sites"][str(site["id"])]
    assert all(after["plugins"][slug]["active"] for slug in plugins)  # the others were tried and switched back on
    [alarm] = summary.broken
    name = after["plugins"][bad]["name"]
    assert alarm.containment.status is ContainmentStatus.not_contained
    assert f"never deactivated by policy: {name}" in alarm.containment.detail
    assert bad in {s.slug for s in alarm.suspects}


async def test_a_load_time_break_alerts_at_once_counts_against_the_budget_and_is_not_sent_again(
    dashboard, tmp_path: Path
):
    emulator = dashboard(sites=12, seed=4)
    truth = emulator.truth()
    site, plugins, bad = three_plugin_site(truth)
    version = next(u["new_version"] for u in site["pending_updates"] if u["slug"] == bad)
    other = other_site_offered(truth, bad, version, site["id"])
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": bad, "mode": "load"})
    policy = (f'rollout:\n  cohorts: ["site:{site["id"]}", "rest"]\n  failure_budget: 0\n')

    summary = await run_night([site["id"], other["id"]], tmp_path, "first", policy=policy)

    [alarm] = summary.broken
    assert alarm.containment.status is ContainmentStatus.unreachable
    assert alarm.containment.headline == "down, unreachable by the dashboard"
    [alert] = list((tmp_path / "reports" / "alerts").glob(f"break-*-{site['id']}.eml"))
    message = email.message_from_bytes(alert.read_bytes(), policy=email.policy.default)
    text = message.get_body(("plain",)).get_content()
    assert "down, unreachable by the dashboard" in message["subject"] and alarm.site_name in message["subject"]
    assert f"wp-content/plugins/{bad.split('/')[0]}" in text
    from_version = next(item.from_version for item in summary.items if item.slug == bad and item.site_id == site["id"])
    assert f"restore version {from_version}" in text
    assert site["url"].rstrip("/") in text and f"managesites&dashboard={site['id']}" in text
    assert "NOMAINWP" in alarm.containment.detail and alarm.containment.detail.count("/run") == 1
    deactivations = [n for call, n in emulator.writes().items() if "deactivate-site-plugins" in call]
    assert deactivations == [1], "the dashboard's definite answer is not sent again"
    assert datetime.fromtimestamp(alert.stat().st_mtime).astimezone() < summary.finished_at  # during the night
    operator = (tmp_path / "reports" / summary.run_id / "report" / "operator.html").read_text()
    assert "down, unreachable by the dashboard" in operator and f"wp-content/plugins/{bad.split('/')[0]}" in operator
    first_cohort, rest = summary.cohorts
    assert first_cohort.failures == 1 and first_cohort.status == "stopped" and rest.status == "not_started"
    assert emulator.truth()["sites"][str(other["id"])]["plugins"][bad]["version"] != version

    second = await run_night([other["id"]], tmp_path, "second")
    [held] = [item for item in second.items if item.slug == bad]
    assert held.outcome is Outcome.held and held.rule == "night_hold"
    assert emulator.truth()["sites"][str(other["id"])]["plugins"][bad]["version"] != version


async def test_a_dashboard_error_while_containing_leaves_the_site_reported_and_the_night_going(
    dashboard, monkeypatch, tmp_path: Path
):
    emulator = dashboard(sites=12, seed=4)
    site, plugins, _ = three_plugin_site(emulator.truth())
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": plugins[0], "mode": "break"})

    async def failing(self, id_or_domain):
        raise ServerError("Internal Server Error", status=500, method="GET", path=f"/sites/{id_or_domain}/plugins")

    monkeypatch.setattr(DashboardClient, "site_plugins", failing)
    summary = await run_night([site["id"]], tmp_path, "failing")

    [alarm] = summary.broken
    assert alarm.containment.status is ContainmentStatus.not_contained
    assert "containing it failed: GET /sites/" in alarm.containment.detail
    assert {s.slug for s in alarm.suspects} >= set(plugins)
    assert all(emulator.truth()["sites"][str(site["id"])]["plugins"][slug]["active"] for slug in plugins)
    assert not summary.errors  # the lane was not lost
    assert {item.outcome for item in summary.items if item.slug in plugins} == {Outcome.updated}
