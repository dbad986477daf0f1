"""REST v2 families over HTTP: shapes, pagination, update semantics, ignore lists, batch limit, bad input."""

from __future__ import annotations

import httpx

from emulator.testing import InProcessEmulator

NS = "/svc/v2"


async def test_sites_pagination_filters_and_lookup(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    first = (await rw.get(f"{NS}/sites", params={"page": 1, "per_page": 7})).json()
    second = (await rw.get(f"{NS}/sites", params={"page": 2, "per_page": 7})).json()
    assert first["total"] == second["total"] == 30 and len(first["data"]) == 7
    assert {s["id"] for s in first["data"]}.isdisjoint({s["id"] for s in second["data"]})
    assert len((await rw.get(f"{NS}/sites", params={"per_page": 0})).json()["data"]) == 30
    assert len((await rw.get(f"{NS}/sites")).json()["data"]) == 20  # the dashboard's default page
    site = first["data"][0]
    assert isinstance(site["id"], str) and isinstance(site["plugins"], str)
    by_domain = (await rw.get(f"{NS}/sites/" + site["url"].split("://")[1].rstrip("/"))).json()
    assert by_domain["data"]["id"] == site["id"]
    bad = await rw.get(f"{NS}/sites", params={"status": "sleeping"})
    assert bad.status_code == 400 and bad.json()["code"] == "svc_rest_invalid_param"
    bad_page = await rw.get(f"{NS}/sites", params={"page": "two"})
    assert bad_page.status_code == 400 and bad_page.json()["code"] == "rest_invalid_param"
    statuses = {s.id: lab.emulator.state.site_status(s) for s in lab.emulator.state.sites.values()}
    connected = (await rw.get(f"{NS}/sites/count", params={"status": "connected"})).json()["count"]
    assert connected == sum(1 for v in statuses.values() if v == "connected")


async def test_plugin_update_moves_version_and_list_stays_stale_until_sync(
    lab: InProcessEmulator, rw: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    updates = (await rw.get(f"{NS}/updates", params={"type": "plugins"})).json()["data"]
    target = next(u for u in updates if lab.emulator.state.sites[u["site_id"]].reachable)
    site_id, slug = target["site_id"], target["slug"]
    nothing = (await rw.post(f"{NS}/updates/{site_id}/update/plugins")).json()
    assert nothing == {"success": 0, "message": "No Plugins to update."}
    done = (await rw.post(f"{NS}/updates/{site_id}/update/plugins", data={"slug": slug})).json()
    assert done["data"][slug] == {
        "success": 1,
        "name": target["name"],
        "old_version": target["current_version"],
        "version": target["new_version"],
    }
    truth = (await admin.get("/__emulator__/state", params={"site_ids": site_id})).json()["sites"][str(site_id)]
    assert truth["plugins"][slug]["version"] == target["new_version"]
    listed = (await rw.get(f"{NS}/updates", params={"include": site_id})).json()["data"]
    assert any(u["slug"] == slug for u in listed)  # REST plugin updates leave the stored list stale
    assert (await rw.post(f"{NS}/sites/{site_id}/sync")).json()["success"] == 1
    listed = (await rw.get(f"{NS}/updates", params={"include": site_id})).json()["data"]
    assert not any(u["slug"] == slug for u in listed)


async def test_fail_and_fail_silently_and_offline(
    lab: InProcessEmulator, rw: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    state = lab.emulator.state
    themes = [
        u
        for u in state.all_pending_updates(("theme",))
        if state.sites[u.site_id].reachable
        and not state.sites[u.site_id].suspended
        and not state.sites[u.site_id].sync_errors
    ]
    failing, silent = themes[0], themes[1]
    for update, mode in ((failing, "fail"), (silent, "silent")):
        answer = await admin.post(
            "/__emulator__/faults/items",
            json={"site_id": update.site_id, "type": "theme", "slug": update.slug, "mode": mode},
        )
        assert answer.status_code == 200
    failed = (await rw.post(f"{NS}/updates/{failing.site_id}/update/themes", data={"slug": failing.slug})).json()
    assert failed["data"][failing.slug]["success"] == 0
    quiet = (await rw.post(f"{NS}/updates/{silent.site_id}/update/themes", data={"slug": silent.slug})).json()
    assert quiet["data"][silent.slug]["success"] == 1
    assert state.sites[silent.site_id].themes[silent.slug].version == silent.current_version  # did not move
    offline = failing.site_id
    await admin.post("/__emulator__/faults/reachable", json={"site_id": offline, "reachable": False})
    sync = (await rw.post(f"{NS}/sites/{offline}/sync")).json()
    assert sync == {"success": 0, "data": []}
    assert (await rw.get(f"{NS}/sites/{offline}")).json()["data"]["status"] == "disconnected"
    check = (await rw.post(f"{NS}/sites/{offline}/check")).json()
    assert check["data"]["status"] == 0 and check["data"]["http_code"] == 0


async def test_ignore_plugins_hides_the_update(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    update = lab.emulator.state.all_pending_updates(("plugin",))[0]
    answer = (
        await rw.post(f"{NS}/updates/{update.site_id}/ignore/plugins", data={f"slug[{update.slug}]": update.name})
    ).json()
    assert answer["data"] == {update.slug: "success"}
    listed = (await rw.get(f"{NS}/updates", params={"include": update.site_id})).json()["data"]
    assert not any(u["slug"] == update.slug and u["type"] == "plugin" for u in listed)


async def test_tags_crud_and_both_delete_spellings(rw: httpx.AsyncClient) -> None:
    created = (await rw.post(f"{NS}/tags/add", json={"name": "Nightly", "color": "#112233"})).json()
    tag_id = created["data"]["id"]
    assert created["data"]["sites_ids"] is None
    assert (await rw.post(f"{NS}/tags/add", json={"color": "#000000"})).json() == {
        "success": 0,
        "error": "Add tag failed. Please try again.",
    }
    listing = (await rw.get(f"{NS}/tags")).json()
    assert tag_id in listing["data"] and listing["total"] == len(listing["data"])
    edited = (await rw.put(f"{NS}/tags/{tag_id}/edit", json={"name": "Nightly 2"})).json()
    assert edited["data"]["sites_ids"] == ""
    assert (await rw.delete(f"{NS}/tags/{tag_id}/delete")).json()["success"] == 1
    gone = await rw.delete(f"{NS}/tags/{tag_id}/remove")
    assert gone.status_code == 404 and gone.json()["code"] == "svc_rest_invalid_tag_id"
    assert (await rw.post(f"{NS}/tags/1/remove")).json()["code"] == "rest_no_route"


async def test_batch_limit_and_shapes(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    assert (await rw.post(f"{NS}/batch", json={})).json() == []
    answer = (
        await rw.post(
            f"{NS}/batch", json={"sites": {"check": [1]}, "tags": {"create": [{"name": "B"}]}, "sites_sync": [2]}
        )
    ).json()
    assert answer["tags"]["create"][0]["success"] == 1 and set(answer["sites"]) == {"check", "sync"}
    too_many = await rw.post(f"{NS}/tags/batch", json={"delete": list(range(1, 102))})
    assert too_many.status_code == 413
    assert too_many.json()["code"] == "svc_rest_request_entity_too_large"
    lab.emulator.state.set_option("svc_rest_batch_items_limit", 2)
    assert (await rw.post(f"{NS}/batch", json={"sites_check": [1, 2, 3]})).status_code == 413
    missing = (await rw.post(f"{NS}/tags/batch", json={"delete": [9999]})).json()
    assert missing["delete"][0]["error"]["code"] == "svc_rest_invalid_tag_id"


async def test_keys_lifecycle(rw: httpx.AsyncClient, lab: InProcessEmulator) -> None:
    json_body = await rw.post(f"{NS}/rest-api/add-key", json={"permissions": "read", "active": True})
    assert json_body.status_code == 500 and json_body.json() == {
        "code": "empty_body",
        "message": "Request body is empty.",
        "data": None,
    }
    bad = await rw.post(f"{NS}/rest-api/add-key", data={"permissions": "r,w", "active": "1"})
    assert bad.status_code == 400 and bad.json()["data"]["params"] == {"permissions": "Invalid method value."}
    token = (
        await rw.post(f"{NS}/rest-api/add-key", data={"permissions": "read", "active": "1", "description": "ci"})
    ).json()["token"]
    async with lab.client(headers={"Authorization": "Bearer " + token}) as new:
        assert (await new.get(f"{NS}/sites/count")).status_code == 200
    both = (await rw.post(f"{NS}/rest-api/add-key", data={"permissions": "both", "active": "1"})).json()["token"]
    async with lab.client(headers={"Authorization": "Bearer " + both}) as writer:  # the spec's "both"
        assert (await writer.post(f"{NS}/tags/add", json={"name": "by both"})).json()["success"] == 1
    key_id = max(lab.emulator.state.api_keys)
    assert (await rw.delete(f"{NS}/rest-api/delete-key/{key_id}")).json()["success"] == 1
    again = await rw.delete(f"{NS}/rest-api/delete-key/{key_id}")
    assert again.status_code == 500 and again.json()["code"] == "api_key_not_found"


async def test_settings_tools_and_bad_input(rw: httpx.AsyncClient) -> None:
    general = (await rw.get(f"{NS}/settings/general")).json()["data"]
    assert "svc_widgets" in general
    edited = await rw.put(f"{NS}/settings/general/edit", json={"backup_before_upgrade_days": 3})
    assert edited.json()["data"]["backup_before_upgrade_days"] == 3
    wrong = await rw.put(f"{NS}/settings/general/edit", json={"backup_before_upgrade_days": "soon"})
    assert wrong.status_code == 400 and wrong.json()["code"] == "rest_invalid_param"
    started = (await rw.post(f"{NS}/settings/tools/renew-connections")).json()
    status = (await rw.get(f"{NS}/settings/tools/renew-connections-status/{started['renew_id']}")).json()
    assert status["status"] == "completed" and status["success"] is True
    assert (await rw.get(f"{NS}/settings/tools/renew-connections/status")).json()["status"] == "completed"
    malformed = await rw.post(f"{NS}/tags/add", content=b"{not json", headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400 and malformed.json()["code"] == "rest_invalid_json"


async def test_clients_monitors_costs_content_and_modules(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    client = (
        await rw.post(
            f"{NS}/clients/add", data={"name": "Acme", "client_email": "a@acme.test", "selected_sites": "1,2"}
        )
    ).json()["data"]
    assert (await rw.get(f"{NS}/clients/a@acme.test")).json()["data"]["id"] == client["id"]
    assert (await rw.get(f"{NS}/clients/{client['id']}/sites/count")).json()["total"] == 2
    assert (await rw.get(f"{NS}/clients/count")).json()["total"] == str(len(lab.emulator.state.clients))
    monitor = (await rw.get(f"{NS}/monitors/1")).json()["data"]
    assert monitor["id"] == 1 and len(monitor["uptime_24h"]) == 24
    checked = (await rw.post(f"{NS}/monitors/1/check")).json()["data"]
    assert checked["uptime_status"] in ("up", "down")
    assert (await rw.get(f"{NS}/monitors/999")).json() == {"success": 0, "message": "Monitor not found."}
    cost = (await rw.post(f"{NS}/costs/add", data={"name": "Hosting", "sites[]": "1", "price": "9.5"})).json()
    assert cost["data"]["name"] == "Hosting"
    post = (await rw.post(f"{NS}/posts/1/create", data={"post_title": "Hello"})).json()["data"]
    assert (await rw.get(f"{NS}/posts/1/{post['id']}")).json()["data"]["title"] == "Hello"
    assert (await rw.get(f"{NS}/ssl-monitor/info")).status_code == 200


async def test_module_off_is_rest_no_route() -> None:
    from emulator.config import EmulatorConfig

    lab = InProcessEmulator(EmulatorConfig(namespace="svc", sites=2, modules=frozenset({"logs"})))
    async with lab.client(headers={"Authorization": "Bearer " + lab.credentials["api_keys"]["read"]}) as client:
        for path in ("/svc/v2/costs", "/svc/v2/ssl-monitor/info", "/svc/v2/lighthouse/results"):
            response = await client.get(path)
            assert response.status_code == 404 and response.json()["code"] == "rest_no_route"
    lab.close()


async def test_ground_truth_counts_requests_per_route(rw: httpx.AsyncClient, admin: httpx.AsyncClient) -> None:
    for _ in range(3):
        await rw.get(f"{NS}/sites/1/plugins")
    counts = (await admin.get("/__emulator__/state", params={"site_ids": "1"})).json()["request_counts"]
    assert counts["GET /svc/v2/sites/{id_domain}/plugins"] == 3
    refused = await admin.post("/__emulator__/faults/items", json={"site_id": 1, "type": "plugin", "slug": "nope"})
    assert refused.status_code == 404
