"""The night revives a site dead at load through its Fleet Guard (issue 45): the culprit found by leaving plugins
out on the dead site, paused, switched off through the dashboard, its kept version put back and switched on, the
site checked and re-synced; only the culprit held. A site without a guard stays down, and the night says why."""

from __future__ import annotations

import base64
import copy
import email
import email.policy
from pathlib import Path

import pytest

from fleet.model.summary import ContainmentStatus, Outcome
from fleet.state.holds import HoldStore
from fleet.state.incidents import IncidentStore
from guard.signing import private_key, public_key_text
from tests.pipeline.conftest import memory_of
from tests.pipeline.guard_invariant import guarded_sites_left_down
from tests.pipeline.test_culprit_night import run_night, three_plugin_site

pytestmark = pytest.mark.usefixtures("prefect_harness")
KEY = base64.b64encode(b"fleet-guard-the-night-test-key!!").decode()


def another_site(truth: dict, besides: int) -> tuple[dict, str]:
    """A second connected site with an active plugin offered an update, and that plugin."""
    for site in truth["sites"].values():
        if site["id"] != besides and site["status"] == "connected" and site["reachable"]:
            active = [u["slug"] for u in site["pending_updates"]
                      if u["type"] == "plugin" and site["plugins"][u["slug"]]["active"]]
            if len(active) >= 2:
                return site, active[0]
    raise AssertionError("no second site with two active plugins to update")


async def test_a_guarded_site_dead_at_load_is_revived_and_an_unguarded_one_is_said_to_be_beyond_reach(
    dashboard, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("FLEET_GUARD_KEY", KEY)
    emulator = dashboard(sites=12, seed=4)
    truth = emulator.truth()
    site, plugins, bad = three_plugin_site(truth)
    other, other_bad = another_site(truth, site["id"])
    old = site["plugins"][bad]["version"]
    emulator.post("guard", {"site_id": site["id"], "armed": True, "keys": [public_key_text(private_key(KEY))]})
    for broken, slug in ((site, bad), (other, other_bad)):
        emulator.post("faults/items", {"site_id": broken["id"], "type": "plugin", "slug": slug, "mode": "load"})

    summary = await run_night([site["id"], other["id"]], tmp_path, "night")

    after = emulator.truth()
    revived = after["sites"][str(site["id"])]
    assert revived["front_end"]["status"] == "up" and revived["sync_errors"] == ""
    assert revived["plugins"][bad]["version"] == old and revived["plugins"][bad]["active"]  # the last working one
    items = {item.slug: item for item in summary.items if item.site_id == site["id"]}
    for slug in plugins:
        if slug != bad:  # the innocent ones stay updated and active
            assert items[slug].outcome is Outcome.updated and revived["plugins"][slug]["active"]
            assert revived["plugins"][slug]["version"] == items[slug].to_version
    assert revived["guard"]["paused"] == [] and revived["guard"]["kept"][f"plugin:{bad}"][-1] == old

    alarms = {alarm.site_id: alarm for alarm in summary.broken}
    contained = alarms[site["id"]].containment
    assert contained.status is ContainmentStatus.revived and contained.culprit.slug == bad
    assert contained.headline.startswith("down, then revived by the night")
    for evidence in ("answered", "left out", "paused: the page answers, the child answers",
                     "switched off through the dashboard", f"{old} put back from the guard's keep and switched on"):
        assert evidence in contained.detail, evidence
    assert [s.slug for s in alarms[site["id"]].suspects] == [bad]

    dead = alarms[other["id"]].containment
    assert dead.status is ContainmentStatus.unreachable
    assert after["sites"][str(other["id"])]["front_end"]["dead_at_load"]
    assert "the night cannot revive it: its guard does not answer" in dead.detail

    holds = HoldStore(memory_of()).active()
    held_here = [(hold.slug, hold.kind.value) for hold in holds if hold.site == site["url"]]
    assert held_here == [(bad, "culprit")]  # only the culprit: the innocent releases go on to other sites
    incidents = {i.site_id: i for i in IncidentStore(memory_of())
                 .open_incidents(summary.dashboard)}
    assert site["id"] not in incidents and other["id"] in incidents  # the revived one closed that night
    alerts = {path.name: message_text(path) for path in (tmp_path / "reports" / "alerts").glob("break-*.eml")}
    [down] = [text for name, text in alerts.items() if name.endswith(f"-{other['id']}.eml")]
    [revived_said] = [text for name, text in alerts.items() if name.endswith(f"-{site['id']}.eml")]
    assert "cannot revive it" in down and "revived it through its Fleet Guard" in revived_said  # one each, true
    assert after["guard_calls"]["probe"] <= 3 and after["guard_calls"]["pause"] == 1
    operator = (tmp_path / "reports" / summary.run_id / "report" / "operator.txt").read_text()
    assert "revived by the night" in operator and "the night cannot revive it" in operator
    client = next(path for path in (tmp_path / "reports" / summary.run_id / "report").glob("*.txt")
                  if path.name != "operator.txt" and site["url"].rstrip("/") in path.read_text())
    assert "the version before it runs again" in client.read_text()  # what was done, never how

    home = [public_key_text(private_key(KEY))]
    assert guarded_sites_left_down(after, summary, keys=home) == []  # the unguarded site is not promised
    had_it_failed = copy.deepcopy(after)  # the invariant itself: the same night, had the revival failed
    had_it_failed["sites"][str(site["id"])]["front_end"] |= {"status": "broken", "fatal_by": f"plugin:{bad}"}
    [violation] = guarded_sites_left_down(had_it_failed, summary, keys=home)
    assert f"site {site['id']}" in violation and f"plugin:{bad}" in violation
    assert guarded_sites_left_down(had_it_failed, summary, keys=["another fleet's key"]) == []


def message_text(path: Path) -> str:
    """The plain text of an alert written as an .eml file, decoded."""
    message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    return " ".join(message.get_body(preferencelist=("plain",)).get_content().split())
