"""Bad releases as a real MainWP suffers them: a fatal in a template (the pages die, the child still answers) and a
fatal at load (the pages AND the MainWP Child die); the "known offline" flag a failed check sets, which refuses
the site until a check succeeds; plugin (de)activation that changes the site for real."""

from __future__ import annotations

from typing import Any

import httpx

from emulator.operations import CHILD_NOT_DETECTED, KNOWN_OFFLINE
from emulator.records import Site
from tests.emulator import test_site_pages
from tests.emulator.abilities_harness import ROOT_URL, Dashboard, run
from tests.emulator.test_site_pages import admin, healthy_site_with_plugin_update, page_url

board, web = test_site_pages.board, test_site_pages.web  # the same fleet and public web as the pages' tests


async def mark(web: httpx.AsyncClient, board: Dashboard, site: Site, slug: str, mode: str) -> None:
    answer = await web.post("/__emulator__/faults/items", headers=admin(board),
                            json={"site_id": site.id, "type": "plugin", "slug": slug, "mode": mode})
    assert answer.status_code == 200, answer.text


async def ability(board: Dashboard, name: str, payload: dict[str, Any]) -> dict[str, Any]:
    async with board.client() as client:
        answer = await run(client, f"svc/{name}", payload)
    return answer.json()


async def truth_of(web: httpx.AsyncClient, board: Dashboard, site: Site) -> dict[str, Any]:
    answer = await web.get("/__emulator__/state", params={"site_ids": site.id}, headers=admin(board))
    return answer.json()["sites"][str(site.id)]


async def test_a_fatal_at_load_is_reported_updated_then_the_site_and_its_child_are_dead(board: Dashboard, web) -> None:
    site, slug = healthy_site_with_plugin_update(board)
    old = site.plugins[slug].version
    other = next(s for s in site.plugins if s != slug)
    other_version = site.plugins[other].version
    await mark(web, board, site, slug, "load")
    updated = await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    assert [(u["slug"], u["old_version"]) for u in updated["updated"]] == [(slug, old)]  # as the real one answered
    page = await web.get(page_url(board, site))
    synced = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    deactivated = await ability(board, "deactivate-site-plugins-v1",
                                {"site_id_or_domain": site.id, "plugins": [slug]})
    assert page.status_code == 500 and "critical error" in page.text
    assert synced["synced"] == [] and synced["errors"][0]["message"] == CHILD_NOT_DETECTED
    assert deactivated["deactivated"] == [] and deactivated["errors"][0]["message"] == CHILD_NOT_DETECTED
    assert site.plugins[slug].active  # nothing reached it
    truth = await truth_of(web, board, site)
    assert truth["front_end"]["dead_at_load"] and truth["front_end"]["fatal_by"] == f"plugin:{slug}"
    assert truth["sync_errors"] == CHILD_NOT_DETECTED

    checked = await ability(board, "check-site-v1", {"site_id_or_domain": site.id})
    assert checked["status"]["online"] is False and checked["status"]["http_code"] == 500
    refused = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    assert refused["errors"][0]["code"] == "svc_site_offline" and refused["errors"][0]["message"] == KNOWN_OFFLINE
    again = await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [other]})
    assert again["code"] == "svc_site_offline" and again["message"] == KNOWN_OFFLINE
    assert site.plugins[other].version == other_version


async def test_a_repaired_site_stays_refused_until_a_check_of_it_succeeds(board: Dashboard, web) -> None:
    site, slug = healthy_site_with_plugin_update(board)
    await mark(web, board, site, slug, "load")
    await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    await ability(board, "check-site-v1", {"site_id_or_domain": site.id})  # the night's check sets the flag

    repaired = await web.post("/__emulator__/sites/repair", headers=admin(board), json={"site_id": site.id})
    assert repaired.json()["repaired"] == f"plugin:{slug}" and repaired.json()["front_end"] == "up"
    assert (await web.get(page_url(board, site))).status_code == 200
    refused = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    assert refused["synced"] == [] and refused["errors"][0]["message"] == KNOWN_OFFLINE  # repaired, still refused
    checked = await ability(board, "check-site-v1", {"site_id_or_domain": site.id})
    synced = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    assert checked["status"]["online"] is True
    assert [s["id"] for s in synced["synced"]] == [site.id] and synced["errors"] == []


async def test_deactivating_the_plugin_that_broke_the_front_end_heals_its_pages(board: Dashboard, web) -> None:
    site, slug = healthy_site_with_plugin_update(board)
    await mark(web, board, site, slug, "break")
    await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    broken = await web.get(page_url(board, site))
    off = await ability(board, "deactivate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})
    healed = await web.get(page_url(board, site))
    on = await ability(board, "activate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})
    again = await web.get(page_url(board, site))
    assert broken.status_code == 500
    assert [p["slug"] for p in off["deactivated"]] == [slug] and off["errors"] == []
    assert healed.status_code == 200 and "critical error" not in healed.text
    assert [p["slug"] for p in on["activated"]] == [slug] and again.status_code == 500  # its code runs again


async def test_the_rest_api_deactivates_for_real_and_reaches_no_dead_child(board: Dashboard, web) -> None:
    front, culprit = healthy_site_with_plugin_update(board)
    await mark(web, board, front, culprit, "break")
    await ability(board, "update-site-plugins-v1", {"site_id_or_domain": front.id, "slugs": [culprit]})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL,
                                 headers={"Authorization": "Bearer " + board.credentials["api_keys"]["read_write"]},
                                 ) as rest:
        off = (await rest.post(f"/wp-json/svc/v2/sites/{front.id}/plugins/deactivate", params={"slug": culprit}))
        assert off.status_code == 200 and off.json()["success"] == 1
        assert (await web.get(page_url(board, front))).status_code == 200
        front.fatal_by, front.broken_by = f"plugin:{culprit}", ""
        front.plugins[culprit].active = True
        dead = (await rest.post(f"/wp-json/svc/v2/sites/{front.id}/plugins/deactivate", params={"slug": culprit}))
    assert dead.json()["success"] == 0 and dead.json()["data"]["error"] == CHILD_NOT_DETECTED
    assert front.plugins[culprit].active

