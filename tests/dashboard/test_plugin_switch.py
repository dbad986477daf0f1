"""Plugins deactivated and re-activated through the client, checked against the emulator's ground truth."""

from __future__ import annotations

import pytest

from dashboard import DashboardClient
from dashboard.errors import ActionFailed, InvalidInput, error_from_response, is_deterministic
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
