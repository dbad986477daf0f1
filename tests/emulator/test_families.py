"""The remaining families over HTTP: whole-site and dashboard-wide updates, core and translations,
connection and suspension, clients fields, costs, posts/pages, users, extensions, legacy v1, namespaces."""

from __future__ import annotations

import httpx

from emulator.config import EmulatorConfig
from emulator.records import Site
from emulator.testing import InProcessEmulator

NS = "/svc/v2"


def healthy(lab: InProcessEmulator) -> list[Site]:
    return [
        s
        for s in lab.emulator.state.sites.values()
        if s.reachable and s.child_connected and not s.suspended and not s.sync_errors
    ]


async def test_site_update_all_and_core_and_translation(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    state = lab.emulator.state
    site = next(s for s in healthy(lab) if state.pending_updates(s))
    answer = (await rw.post(f"{NS}/updates/{site.id}/update")).json()
    assert answer["message"] == "Batch updates for the site completed." and answer["summary"] == []
    assert state.pending_updates(site) == []  # everything moved, the stored list refreshed
    core_site = next(s for s in healthy(lab) if s.known_wp_offer and not s.ignore_core_updates)
    offered = core_site.wp_offer
    core = (await rw.post(f"{NS}/updates/{core_site.id}/update/wp")).json()
    assert core["data"] == {"old_version": core["data"]["old_version"], "version": offered}
    assert core_site.wp_version == offered
    assert (await rw.post(f"{NS}/updates/{core_site.id}/wp")).json()["success"] == 0  # nothing left
    translated = next(
        (s for s in healthy(lab) if s.translations and any(i.offer for i in s.translations.values())), None
    )
    if translated is not None:
        slug = next(i.slug for i in translated.translations.values() if i.offer)
        answer = (await rw.post(f"{NS}/updates/{translated.id}/update/translations", data={"slug": slug})).json()
        assert answer["data"][slug]["success"] == 1 and answer["data"][slug]["old_version"] == ""


async def test_dashboard_wide_update_counts_items_and_sites(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    state = lab.emulator.state
    before = len(state.all_pending_updates())
    answer = (await rw.post(f"{NS}/updates/update")).json()
    summary = answer["summary"]
    assert answer["message"] == "Batch updates completed."
    assert summary["total_updated"] + summary["total_errors"] >= 1 and summary["sites_updated"] >= 1
    assert len(state.all_pending_updates()) < before
    assert state.options["last_time_start_batch_updates"] == answer["last_time_start_batch_updates"]


async def test_suspended_site_refuses_updates_and_reconnect_fixes_disconnected(
    lab: InProcessEmulator, rw: httpx.AsyncClient
) -> None:
    site = healthy(lab)[0]
    assert (await rw.post(f"{NS}/sites/{site.id}/suspend")).json()["suspended"] == 1
    refused = await rw.post(f"{NS}/updates/{site.id}/update/plugins", data={"slug": "x"})
    assert refused.status_code == 400 and refused.json()["code"] == "svc_rest_updates_site_error"
    assert (await rw.get(f"{NS}/sites/count", params={"status": "suspended"})).json()["count"] >= 1
    assert (await rw.post(f"{NS}/sites/{site.id}/unsuspend")).json()["suspended"] == 0
    site.sync_errors, site.child_connected = "Manually disconnected", False
    answer = (await rw.post(f"{NS}/sites/reconnect", params={"include": site.id})).json()
    assert answer["data"] == {str(site.id): "success"}
    assert lab.emulator.state.site_status(site) == "connected"


async def test_sites_add_edit_remove(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    refused = (await rw.post(f"{NS}/sites/add", json={"url": "https://new.example.org", "admin": "a"})).json()
    assert refused["success"] == 0
    added = (
        await rw.post(
            f"{NS}/sites/add",
            json={"url": "https://new.example.org", "name": "New", "admin": "a", "adminpassword": "p"},
        )
    ).json()
    site_id = added["data"]["id"]
    again = (
        await rw.post(f"{NS}/sites/add", json={"url": "https://new.example.org/", "admin": "a", "adminpassword": "p"})
    ).json()
    assert again["success"] == 0 and again["found_id"] == site_id
    edited = (await rw.post(f"{NS}/sites/{site_id}/edit", json={"name": "Renamed", "groupids": "1,2"})).json()
    assert edited["data"]["name"] == "Renamed" and set(edited["data"]["tags"]) == {"1", "2"}
    assert (await rw.get(f"{NS}/sites/new.example.org")).json()["data"]["id"] == site_id
    assert (await rw.delete(f"{NS}/sites/{site_id}/remove")).json()["success"] == 1
    assert (await rw.post(f"{NS}/sites/{site_id}/sync")).status_code == 404


async def test_client_fields_and_cost_batch(rw: httpx.AsyncClient) -> None:
    field = (await rw.post(f"{NS}/clients/fields/add", data={"name": "plan", "description": "Plan"})).json()["data"]
    listed = (await rw.get(f"{NS}/clients/fields")).json()
    assert any(f["name"] == "plan" for f in listed["data"]) and listed["pages"] == 1
    assert (await rw.put(f"{NS}/clients/fields/plan/edit", json={"description": "Tier"})).json()["data"][
        "description"
    ] == "Tier"
    assert (await rw.delete(f"{NS}/clients/fields/{field['field_id']}/delete")).json()["success"] == 1
    batch = (
        await rw.post(
            f"{NS}/costs/batch", json={"create": [{"name": "CDN", "sites": [1]}, {"name": "x"}], "delete": [9999]}
        )
    ).json()
    assert batch["create"][0]["success"] == 1
    assert batch["create"][1]["error"]["code"] == "svc_rest_create_costs_invalid_data"
    assert batch["delete"][0]["error"]["code"] == "svc_rest_invalid_costs_id"


async def test_posts_pages_users_and_extensions(rw: httpx.AsyncClient) -> None:
    pages = (await rw.get(f"{NS}/pages", params={"websites": "1"})).json()["data"]
    assert pages and all(p["post_type"] == "page" for p in pages)
    page_id = pages[0]["id"]
    assert (await rw.put(f"{NS}/pages/1/{page_id}/update-status", json={"status": "draft"})).json()["data"][
        "status"
    ] == "draft"
    bad = await rw.put(f"{NS}/pages/1/{page_id}/update-status", json={"status": "gone"})
    assert bad.status_code == 400
    assert (await rw.delete(f"{NS}/pages/1/{page_id}/delete")).json()["success"] == 1
    created = (
        await rw.post(
            f"{NS}/users/create", data={"username": "ops", "email": "ops@x.test", "role": "editor", "websites": "1,2"}
        )
    ).json()["data"]
    assert [c["success"] for c in created] == [1, 1]
    imported = (await rw.post(f"{NS}/users/import", data={"csv_file": "u,e,r,s\nbob,b@x.test,author,1;2\n"})).json()
    assert imported["data"][0]["success"] == 1
    users = (await rw.get(f"{NS}/users", params={"websites": "1", "roles": "author"})).json()["data"]
    assert [u["login"] for u in users] == ["bob"]
    task = (await rw.post(f"{NS}/time-tracker/tasks/add", data={"title": "Patch night"})).json()["data"]
    assert (await rw.post(f"{NS}/time-tracker/tasks/{task['id']}/start")).json()["data"]["status"] == "running"
    assert (await rw.get(f"{NS}/lighthouse/results/1")).json()["data"]["site_id"] == 1
    assert (await rw.get(f"{NS}/domain-monitor/profiles")).json()["total"] >= 1


async def test_legacy_v1_routes(lab: InProcessEmulator) -> None:
    v1 = lab.credentials["v1"]
    async with lab.client(params=v1) as client:
        rows = (await client.get("/svc/v1/sites/all-sites")).json()
        assert set(rows) == {str(i) for i in lab.emulator.state.sites}
        assert (await client.get("/svc/v1/sites/connected-sites-count")).json()["count"] >= 1
        one = (await client.get("/svc/v1/site/site", params={"site_id": 1})).json()
        assert one["id"] == "1"
        assert (await client.get("/svc/v1/site/site")).json() == {"ERROR": "Required parameter is missing."}
        assert (await client.get("/svc/v1/sites")).json()["code"] == "rest_no_route"
        site = healthy(lab)[0]
        active = (await client.get("/svc/v1/site/site-active-plugins", params={"site_id": site.id})).json()
        assert {p["slug"] for p in active} == {p.slug for p in site.plugins.values() if p.active}
        pending = lab.emulator.state.pending_updates(site, ("plugin",))
        if pending:
            moved = (
                await client.put(
                    "/svc/v1/site/site-update-plugins", params={"site_id": site.id, "slug": pending[0].slug}
                )
            ).json()
            assert moved[pending[0].slug]["result"] == "success"
            assert site.plugins[pending[0].slug].version == pending[0].new_version
        wrong_method = await client.get("/svc/v1/site/site-update-plugins", params={"site_id": site.id})
        assert wrong_method.json()["code"] == "rest_no_route"


async def test_namespace_changes_paths_codes_and_setting_names() -> None:
    lab = InProcessEmulator(EmulatorConfig(namespace="mainwp", sites=3))
    async with lab.client(headers={"Authorization": "Bearer " + lab.credentials["api_keys"]["read_write"]}) as c:
        assert (await c.get("/svc/v2/sites/count")).json()["code"] == "rest_no_route"
        assert (await c.get("/mainwp/v2/sites/count")).json() == {"count": 3}
        assert (await c.get("/mainwp/v2/tags/999")).json()["code"] == "mainwp_rest_invalid_tag_id"
        assert "mainwp_optimize" in (await c.get("/mainwp/v2/settings/advanced")).json()["data"]
        assert set(lab.emulator.state.options) >= {"mainwp_rest_batch_items_limit", "mainwp_abilities_batch_threshold"}
        assert "mainwp/v2" in (await c.get("/")).json()["namespaces"]
        assert (await c.get("/mainwp/v2/sites/1/non-mainwp-changes")).json()["success"] == 1
        assert (await c.get("/mainwp/v2/sites/1/non-svc-changes")).json()["code"] == "rest_no_route"
    lab.close()


async def test_users_import_accepts_a_csv_upload(rw: httpx.AsyncClient) -> None:
    csv_text = "username,email,role,sites\ncarol,c@x.test,editor,1\n"
    answer = await rw.post(
        f"{NS}/users/import", files={"csv_file": ("users.csv", csv_text, "text/csv")}, data={"has_header": "1"}
    )
    assert answer.status_code == 200 and answer.json()["data"][0]["success"] == 1
    users = (await rw.get(f"{NS}/users", params={"websites": "1", "search": "carol"})).json()["data"]
    assert [u["role"] for u in users] == ["editor"]


async def test_dashboard_times_follow_the_emulator_clock(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    import time

    site = healthy(lab)[0]
    lab.emulator.clock.advance(86_400 / lab.emulator.clock.time_scale)  # one day of dashboard time
    assert (await rw.post(f"{NS}/sites/{site.id}/sync")).json()["success"] == 1
    assert site.last_sync > time.time() + 86_000
