"""The dashboard's sync record of a child's version, which MainWP 6.1.2's `check_child_version` reads: a sync the
child does not answer records version 0 (`sync_information_array` starts from 0), so every gated call answers
`mainwp_child_outdated` for that site, even after it is repaired and a check passes, until a reconnect that
reaches the child records the version again. The REST site record keeps showing the child's real version."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from emulator.jobs import CHILD_OUTDATED
from emulator.operations import CHILD_NOT_DETECTED
from emulator.records import Site
from tests.emulator import test_site_pages
from tests.emulator.abilities_harness import ROOT_URL, Dashboard
from tests.emulator.test_breakage import ability, mark, truth_of
from tests.emulator.test_site_pages import admin, healthy_site_with_plugin_update, page_url

board, web = test_site_pages.board, test_site_pages.web  # the same fleet and public web as the pages' tests


@pytest.fixture
async def rest(board: Dashboard) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=f"{ROOT_URL}/wp-json/svc/v2",
                                 headers={"Authorization": "Bearer " + board.credentials["api_keys"]["read_write"]},
                                 ) as client:
        yield client


async def kill_by_a_failed_sync(board: Dashboard, web: httpx.AsyncClient) -> tuple[Site, str]:
    """A healthy site whose plugin update fatals at load, then a sync its dead child does not answer."""
    site, slug = healthy_site_with_plugin_update(board)
    await mark(web, board, site, slug, "load")
    await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    synced = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    assert [e["code"] for e in synced["errors"]] == ["svc_sync_failed"]
    return site, slug


async def test_a_failed_sync_gates_the_site_after_repair_and_check_until_a_reconnect(board: Dashboard, web,
                                                                                     rest) -> None:
    site, _ = await kill_by_a_failed_sync(board, web)
    truth = await truth_of(web, board, site)
    assert truth["synced_child_version"] == "0" and truth["child_version"] == site.child_version != "0"
    assert truth["sync_errors"] == CHILD_NOT_DETECTED
    checked = await ability(board, "check-site-v1", {"site_id_or_domain": site.id})  # the night's check: down
    repaired = await web.post("/__emulator__/sites/repair", headers=admin(board), json={"site_id": site.id})
    rechecked = await ability(board, "check-site-v1", {"site_id_or_domain": site.id})
    assert checked["status"]["online"] is False and repaired.json()["front_end"] == "up"
    assert rechecked["status"]["online"] is True and (await web.get(page_url(board, site))).status_code == 200

    synced = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    plugins = await rest.get(f"/sites/{site.id}/plugins")
    listed = await ability(board, "get-site-plugins-v1", {"site_id_or_domain": site.id})
    updated = await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id})
    rest_sync = (await rest.post(f"/sites/{site.id}/sync")).json()
    record = (await rest.get(f"/sites/{site.id}")).json()["data"]
    assert synced["synced"] == [] and [(e["code"], e["message"]) for e in synced["errors"]] == [
        ("svc_child_outdated", CHILD_OUTDATED)]
    assert plugins.status_code == 400
    assert plugins.json() == {"code": "svc_child_outdated", "message": CHILD_OUTDATED, "data": {"status": 400}}
    assert listed == updated == {"code": "svc_child_outdated", "message": CHILD_OUTDATED,
                                 "data": {"status": 400, "site_id": site.id}}
    assert rest_sync == {"success": 0, "data": []}
    assert record["child_version"] == site.child_version and record["sync_errors"] == CHILD_NOT_DETECTED
    assert (await ability(board, "get-site-v1", {"site_id_or_domain": site.id}))["child_version"] == "0"

    reconnected = (await rest.post(f"/sites/{site.id}/reconnect")).json()
    synced = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    plugins = await rest.get(f"/sites/{site.id}/plugins")
    assert reconnected["success"] == 1
    assert [s["id"] for s in synced["synced"]] == [site.id] and synced["errors"] == []
    assert plugins.status_code == 200 and plugins.json()["success"] == 1
    truth = await truth_of(web, board, site)
    assert truth["synced_child_version"] == site.child_version and truth["sync_errors"] == ""


async def test_a_reconnect_the_dead_child_does_not_answer_fails_and_keeps_the_gate(board: Dashboard, web,
                                                                                   rest) -> None:
    site, _ = await kill_by_a_failed_sync(board, web)
    reconnected = (await rest.post(f"/sites/{site.id}/reconnect")).json()
    assert reconnected["success"] == 0
    assert (await truth_of(web, board, site))["synced_child_version"] == "0"
    await web.post("/__emulator__/sites/repair", headers=admin(board), json={"site_id": site.id})
    plugins = await rest.get(f"/sites/{site.id}/plugins")
    assert plugins.status_code == 400 and plugins.json()["code"] == "svc_child_outdated"  # repaired, still gated


async def test_a_site_whose_sync_never_failed_is_not_gated(board: Dashboard, web, rest) -> None:
    dead, _ = await kill_by_a_failed_sync(board, web)
    state = board.emulator.state
    healthy = next(s for s in state.sites.values() if s.id != dead.id and s.reachable and s.child_connected
                   and not s.suspended and s.offline_check_result == 1 and not s.child_version.startswith("3."))
    synced = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [healthy.id]})
    plugins = await rest.get(f"/sites/{healthy.id}/plugins")
    rest_sync = (await rest.post(f"/sites/{healthy.id}/sync")).json()
    assert [s["id"] for s in synced["synced"]] == [healthy.id] and synced["errors"] == []
    assert plugins.status_code == 200 and plugins.json()["success"] == 1
    assert rest_sync["success"] == 1
    assert (await truth_of(web, board, healthy))["synced_child_version"] == healthy.child_version
