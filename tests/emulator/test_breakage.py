"""Bad releases as a real MainWP suffers them: a fatal in a template (the pages die, the child still answers) and a
fatal at load (the pages AND the MainWP Child die); the "known offline" flag a failed check sets, which refuses
the site until a check succeeds; plugin (de)activation that changes the site for real."""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

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
    deactivated = await ability(board, "deactivate-site-plugins-v1",
                                {"site_id_or_domain": site.id, "plugins": [slug]})
    synced = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})  # then the gate refuses it
    assert page.status_code == 500 and "critical error" in page.text
    assert synced["synced"] == [] and synced["errors"][0]["message"] == "Sync operation failed."
    assert deactivated == {"code": "ability_callback_exception", "data": None,
                           "message": 'Ability "svc/deactivate-site-plugins-v1" callback threw an exception: NOMAINWP'}
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
    assert dead.status_code == 500  # `handle_plugins_actions_of_site` returns the exception as a status-less WP_Error
    assert dead.json() == {"code": "svc_rest_deactivate_plugins_action", "message": "NOMAINWP", "data": None}
    assert front.plugins[culprit].active



async def test_every_call_on_a_child_dead_at_load_is_answered_as_mainwp_6_1_2_answers_it(board: Dashboard, web) -> None:
    """`MainWP_Connect::fetch_url` gets WordPress's critical-error page without `<mainwp>` and throws NOMAINWP. The
    plugin (de)activation abilities do not catch it, so WordPress's `WP_Ability::invoke_callback` answers 500
    `ability_callback_exception` quoting it (as a real 6.1.2 answered `deactivate-site-plugins-v1` in the lab);
    the update abilities catch it per item (`update_exception`); a sync records why in the site's `sync_errors`
    and answers only "Sync operation failed."; the REST handlers return it as a status-less WP_Error (500), the
    core route and a whole-site update as `success`. A check reaches the site's pages, not the child."""
    site, slug = healthy_site_with_plugin_update(board)
    other = next(u.slug for u in board.emulator.state.pending_updates(site, ("plugin",)) if u.slug != slug)
    other_version = site.plugins[other].version
    site.wp_offer = site.known_wp_offer = "9.9.9"  # a core release offered, as its last sync saw it
    await mark(web, board, site, slug, "load")
    await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})

    async with board.client() as client:
        abilities = {name: await run(client, f"svc/{name}", payload) for name, payload in {
            "deactivate-site-plugins-v1": {"site_id_or_domain": site.id, "plugins": [slug]},
            "activate-site-plugins-v1": {"site_id_or_domain": site.id, "plugins": [other]},
            "update-site-plugins-v1": {"site_id_or_domain": site.id, "slugs": [other]},
            "run-updates-v1": {"site_ids_or_domains": [site.id], "types": ["plugins"]},
            "update-site-core-v1": {"site_id_or_domain": site.id},
            "sync-sites-v1": {"site_ids_or_domains": [site.id]},  # last: its failure records child version 0
        }.items()}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=f"{ROOT_URL}/wp-json/svc/v2",
                                 headers={"Authorization": "Bearer " + board.credentials["api_keys"]["read_write"]},
                                 ) as rest:
        routes = {path: await rest.post(path, params=params) for path, params in {
            f"/sites/{site.id}/plugins/deactivate": {"slug": slug},
            f"/sites/{site.id}/plugins/activate": {"slug": other},
            f"/updates/{site.id}/update/plugins": {"slug": other},
            f"/updates/{site.id}/update/wp": {},
            f"/updates/{site.id}/update": {},
            f"/sites/{site.id}/sync": {},
        }.items()}
    async with board.client() as client:
        checked = await run(client, "svc/check-site-v1", {"site_id_or_domain": site.id})

    for verb in ("deactivate", "activate"):
        answer = abilities[f"{verb}-site-plugins-v1"]
        assert answer.status_code == 500
        assert answer.json() == {"code": "ability_callback_exception", "data": None, "message":
                                 f'Ability "svc/{verb}-site-plugins-v1" callback threw an exception: NOMAINWP'}
    synced = abilities["sync-sites-v1"].json()
    assert synced["synced"] == [] and [(e["code"], e["message"]) for e in synced["errors"]] == [
        ("svc_sync_failed", "Sync operation failed.")]
    for name in ("update-site-plugins-v1", "run-updates-v1"):
        answer = abilities[name].json()
        assert answer["updated"] == [] and {(e["slug"], e["code"], e["message"]) for e in answer["errors"]} >= {
            (other, "svc_update_exception", "NOMAINWP")}
    core = abilities["update-site-core-v1"]
    assert core.status_code == 500 and core.json() == {"code": "svc_update_exception", "message": "NOMAINWP",
                                                        "data": None}
    for verb in ("deactivate", "activate"):
        answer = routes[f"/sites/{site.id}/plugins/{verb}"]
        assert answer.status_code == 500
        assert answer.json() == {"code": f"svc_rest_{verb}_plugins_action", "message": "NOMAINWP", "data": None}
    plugins = routes[f"/updates/{site.id}/update/plugins"]
    assert plugins.status_code == 500
    assert plugins.json() == {"code": "svc_rest_upgrade_plugins_of_site_error", "message": "NOMAINWP", "data": None}
    assert routes[f"/updates/{site.id}/update/wp"].json() == {"success": 0, "error": CHILD_NOT_DETECTED}
    whole = routes[f"/updates/{site.id}/update"].json()
    assert whole["success"] == 1 and whole["summary"] == []  # the ability's per-site errors are never read
    assert routes[f"/sites/{site.id}/sync"].json() == {"success": 0, "data": []}
    assert checked.json()["status"] == {"online": False, "http_code": 500, "response_time": ANY}
    assert site.plugins[slug].active and site.plugins[other].version == other_version  # nothing reached the child
    truth = await truth_of(web, board, site)
    assert truth["sync_errors"] == CHILD_NOT_DETECTED  # why, for whoever reads the site


async def test_switching_on_a_release_fatal_at_load_answers_nomainwp_and_leaves_it_off(board: Dashboard, web) -> None:
    """As the real 6.1.2 answered the lab's "fixed" 1.6: installed while switched off (nothing loads it), then
    `activate_plugin` loads it in its sandbox and dies there, before the plugin is recorded active."""
    site, slug = healthy_site_with_plugin_update(board)
    await ability(board, "deactivate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})
    await mark(web, board, site, slug, "load")
    updated = await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    assert [u["slug"] for u in updated["updated"]] == [slug]
    assert (await web.get(page_url(board, site))).status_code == 200  # switched off: its code does not load

    on = await ability(board, "activate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})

    assert on == {"code": "ability_callback_exception", "data": None,
                  "message": 'Ability "svc/activate-site-plugins-v1" callback threw an exception: NOMAINWP'}
    truth = await truth_of(web, board, site)
    assert truth["plugins"][slug]["active"] is False and truth["front_end"]["dead_at_load"] is False
    assert (await web.get(page_url(board, site))).status_code == 200  # the pages stay up
