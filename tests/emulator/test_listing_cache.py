"""The cached pending-updates listings (`list-updates-v1` pages, REST `/updates`) follow every change that can
alter them: list, change, list again, and the change shows, in both interfaces, equal to a fresh build."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from emulator.config import EmulatorConfig
from emulator.faults import PROFILES, load_profile
from emulator.records import Site
from tests.emulator.abilities_harness import ROOT_URL, Dashboard, dashboard, run

Row = tuple[int, str, str, str, str]  # site_id, site_name, slug, current_version, new_version


@pytest.fixture
async def board() -> AsyncIterator[Dashboard]:
    async with dashboard(EmulatorConfig(namespace="svc", sites=30, seed=8, time_scale=1e-6), lifespan=False) as b:
        yield b


def fresh(board: Dashboard) -> list[Row]:
    """The listing built from scratch, bypassing every cache."""
    state = board.emulator.state
    return [(u.site_id, u.site_name, u.slug, u.current_version, u.new_version)
            for s in state.sites.values() for u in state._build_pending_updates(s, None, True)]


async def listed(board: Dashboard) -> list[Row]:
    """The whole listing paged through `list-updates-v1`, checked against REST `/updates` and a fresh build."""
    rows: list[Row] = []
    async with board.client() as client:
        page = 1
        while True:
            body = (await run(client, "svc/list-updates-v1", {"page": page, "per_page": 40})).json()
            rows += [(u["site_id"], u["site_name"], u["slug"], u["current_version"], u["new_version"])
                     for u in body["updates"]]
            if not body["updates"]:
                break
            page += 1
    assert len(rows) == body["total"] == body["summary"]["total"]
    key = board.credentials["api_keys"]["read_write"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL + "/wp-json",
                                 headers={"Authorization": "Bearer " + key}) as rest:
        data = (await rest.get("/svc/v2/updates")).json()["data"]
    assert [(u["site_id"], u["site_name"], u["slug"], u["current_version"], u["new_version"]) for u in data] == rows
    assert rows == fresh(board)
    return rows


def admin(board: Dashboard) -> dict[str, str]:
    return {"X-Emulator-Token": board.emulator.config.admin_token.get_secret_value()}


def plugin_updates(board: Dashboard, at_least: int = 1) -> tuple[Site, list[str]]:
    """A healthy site with at least `at_least` plugin updates listed, and their slugs."""
    state = board.emulator.state
    return next((s, slugs) for s in state.sites.values()
                if s.reachable and s.child_connected and not s.suspended
                and len(slugs := [u.slug for u in state.pending_updates(s, ("plugin",))]) >= at_least)


def plugin_update(board: Dashboard) -> tuple[Site, str]:
    site, slugs = plugin_updates(board)
    return site, slugs[0]


def slugs_of(rows: list[Row], site: Site) -> set[str]:
    return {row[2] for row in rows if row[0] == site.id}


async def test_an_applied_update_leaves_the_listing(board: Dashboard) -> None:
    site, slug = plugin_update(board)
    before = await listed(board)
    async with board.client() as client:
        await run(client, "svc/update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    after = await listed(board)
    assert slug in slugs_of(before, site) and slug not in slugs_of(after, site)
    assert len(after) == len(before) - 1


async def test_a_new_offer_shows_after_the_sync_that_brings_it(board: Dashboard) -> None:
    site, slug = plugin_update(board)
    before = await listed(board)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL) as web:
        offered = await web.post("/__emulator__/offers", headers=admin(board),
                                 json={"site_id": site.id, "type": "plugin", "slug": slug, "version": "99.9"})
    not_yet = await listed(board)  # the dashboard lists its stored copy: nothing moves before a sync
    async with board.client() as client:
        await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": [site.id]})
    after = await listed(board)
    assert offered.status_code == 200 and not_yet == before
    assert [r[4] for r in after if r[0] == site.id and r[2] == slug] == ["99.9"]


async def test_per_site_ignores_and_unignores(board: Dashboard) -> None:
    site, slug = plugin_update(board)
    before = await listed(board)
    async with board.client() as client:
        await run(client, "svc/ignore-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
        ignored = await listed(board)
        await run(client, "svc/ignore-site-plugins-v1",
                  {"site_id_or_domain": site.id, "slugs": [slug], "action": "remove"})
    again = await listed(board)
    assert slug not in slugs_of(ignored, site) and len(ignored) == len(before) - 1
    assert again == before


async def test_a_global_ignore_hides_the_item_on_every_site(board: Dashboard) -> None:
    site, slug = plugin_update(board)
    before = await listed(board)
    board.emulator.state.ignore_items(None, "plugin", [slug])  # no dashboard route writes the global list
    after = await listed(board)
    assert slug in {r[2] for r in before} and slug not in {r[2] for r in after}


async def test_added_renamed_and_removed_sites(board: Dashboard) -> None:
    site, _ = plugin_update(board)
    before = await listed(board)
    async with board.client() as client:
        await run(client, "svc/update-site-v1", {"site_id_or_domain": site.id, "name": "Renamed Bakery"})
        renamed = await listed(board)
        await run(client, "svc/delete-site-v1", {"site_id_or_domain": site.id, "confirm": True})
        removed = await listed(board)
        added = (await run(client, "svc/add-site-v1",
                           {"url": "https://fresh.example.com", "name": "Fresh", "admin_username": "admin"})).json()
        new_site = board.emulator.state.find_site("fresh.example.com")
        assert new_site is not None, added
        fresh_site = await listed(board)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL) as web:
            await web.post("/__emulator__/offers", headers=admin(board), json={
                "site_id": new_site.id, "type": "plugin", "slug": "mainwp-child/mainwp-child.php", "version": "6.2"})
        await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": [new_site.id]})
    with_new = await listed(board)
    assert {r[1] for r in renamed if r[0] == site.id} == {"Renamed Bakery"} and len(renamed) == len(before)
    assert not slugs_of(removed, site) and len(removed) == len(before) - len(slugs_of(before, site))
    assert fresh_site == removed
    assert slugs_of(with_new, new_site) == {"mainwp-child/mainwp-child.php"}


async def test_suspension_and_a_deleted_plugin(board: Dashboard) -> None:
    site, slug = plugin_update(board)
    before = await listed(board)
    async with board.client() as client:
        await run(client, "svc/suspend-site-v1", {"site_id_or_domain": site.id})
        suspended = await listed(board)  # the dashboard still lists a suspended site's updates
        await run(client, "svc/unsuspend-site-v1", {"site_id_or_domain": site.id})
        await run(client, "svc/delete-site-plugins-v1",
                  {"site_id_or_domain": site.id, "plugins": [slug], "confirm": True})
    after = await listed(board)
    assert suspended == before
    assert slug not in slugs_of(after, site)


async def test_fault_effects_failed_and_silent_items_stay_listed(board: Dashboard) -> None:
    site, (failing, moving, *_) = plugin_updates(board, at_least=2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL) as web:
        await web.post("/__emulator__/faults/items", headers=admin(board),
                       json={"site_id": site.id, "type": "plugin", "slug": failing, "mode": "silent"})
    before = await listed(board)
    fleet_only = load_profile({"extends": "hostile", "error_rate": 0, "throttle_rate": 0, "drop_rate": 0})
    board.emulator.faults.switch(fleet_only)  # takes sites offline and marks items; every request answered
    switched = await listed(board)
    board.emulator.faults.switch(PROFILES["none"])
    site.reachable = True
    board.emulator.state.save_site(site)
    async with board.client() as client:
        await run(client, "svc/update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [failing, moving]})
    after = await listed(board)
    assert switched == before  # marks and outages change no stored copy
    assert failing in slugs_of(after, site) and moving not in slugs_of(after, site)
