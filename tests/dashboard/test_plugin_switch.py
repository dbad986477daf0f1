"""Plugins deactivated and re-activated through the client, checked against the emulator's ground truth."""

from __future__ import annotations

import pytest

from dashboard import DashboardClient
from dashboard.errors import ActionFailed, InvalidInput, SiteOffline, error_from_response, is_deterministic
from tests.dashboard.emulated import GroundTruth


async def test_a_plugin_is_deactivated_and_activated_again_and_a_missing_one_is_an_error(
    client: DashboardClient, truth: GroundTruth
) -> None:
    site_id, site = next((int(i), s) for i, s in truth.state()["sites"].items()
                         if s["status"] == "connected" and s["reachable"]
                         and any(p["active"] for p in s["plugins"].values()))
    slug = next(slug for slug, plugin in site["plugins"].items() if plugin["active"])

    off = await client.deactivate_plugins(site_id, [slug, "no-such/plugin.php"])
    assert off.switched == [slug] and [error.slug for error in off.errors] == ["no-such/plugin.php"]
    assert truth.state(site_id)["sites"][str(site_id)]["plugins"][slug]["active"] is False
    listed = {plugin.slug: plugin.active for plugin in await client.site_plugins(site_id)}
    assert listed[slug] is False

    on = await client.activate_plugins(site_id, [slug])
    assert on.switched == [slug] and not on.errors
    assert truth.state(site_id)["sites"][str(site_id)]["plugins"][slug]["active"] is True
    with pytest.raises(InvalidInput):
        await client.deactivate_plugins(site_id, [])


def test_a_failed_plugin_action_is_a_typed_error_never_retried() -> None:
    for code in ("mainwp_rest_deactivate_plugins_action", "mainwp_rest_activate_plugins_action",
                 "mainwp_deactivation_failed"):
        error = error_from_response(500, {"code": code, "message": "Exception.", "data": {"status": 500}},
                                    method="POST", path="/sites/1/plugins/deactivate")
        assert isinstance(error, ActionFailed) and is_deterministic(code), code


async def test_a_child_dead_at_load_is_a_site_offline_error_sent_once(client: DashboardClient, truth: GroundTruth
                                                                       ) -> None:
    """MainWP 6.1.2's answer to deactivating a plugin on a child that fatals at load (500 `ability_callback_exception`
    quoting NOMAINWP) says the child did not answer: `SiteOffline`, and the write, though marked idempotent, got its
    answer and is not sent again."""
    site_id, site = next((int(i), s) for i, s in reversed(truth.state()["sites"].items())
                         if s["status"] == "connected" and s["reachable"]
                         and any(u["type"] == "plugin" and s["plugins"][u["slug"]]["active"]
                                 for u in s["pending_updates"]))
    slug = next(u["slug"] for u in site["pending_updates"]
                if u["type"] == "plugin" and site["plugins"][u["slug"]]["active"])
    truth._call("POST", "/faults/items", {"site_id": site_id, "type": "plugin", "slug": slug, "mode": "load"})
    await client.run_updates([site_id], ["plugins"], [slug])
    try:
        before = truth.state(0)["request_counts"]
        with pytest.raises(SiteOffline) as raised:
            await client.deactivate_plugins(site_id, [slug])
        after = truth.state(0)["request_counts"]
    finally:  # the operator's repair, and a check that clears the known-offline flag: the fleet is shared
        truth._call("POST", "/sites/repair", {"site_id": site_id})
        await client.check_sites([site_id])
    assert raised.value.status == 500 and raised.value.code == "ability_callback_exception"
    assert str(raised.value).count("/run") == 1 and str(raised.value).endswith(
        "callback threw an exception: NOMAINWP [ability_callback_exception, HTTP 500]")
    sent = {call: after[call] - before.get(call, 0) for call in after if "deactivate-site-plugins" in call}
    assert list(sent.values()) == [1], sent


def test_the_child_not_answering_is_site_offline_however_the_dashboard_passes_it_on() -> None:
    for code, message in (("ability_callback_exception",
                           'Ability "mainwp/activate-site-plugins-v1" callback threw an exception: NOMAINWP'),
                          ("mainwp_rest_deactivate_plugins_action", "NOMAINWP"),
                          ("mainwp_rest_upgrade_plugins_of_site_error", "HTTPERROR")):
        error = error_from_response(500, {"code": code, "message": message, "data": None}, method="POST",
                                    path="/sites/1/plugins/deactivate")
        assert isinstance(error, SiteOffline), code
    other = error_from_response(500, {"code": "ability_callback_exception", "message":
                                      'Ability "mainwp/x" callback threw an exception: Undefined index'},
                                method="POST", path="/run")
    assert not isinstance(other, SiteOffline)
