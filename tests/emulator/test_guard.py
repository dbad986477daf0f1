"""Fleet Guard on the emulated sites, held to the PHP guard's rules: an armed guard finds, pauses and puts back a
release fatal at load; an unarmed site whose plugin fatals at load stays dead (pages 500, child NOMAINWP); refused
requests get the ordinary page; and its faults (older, removed, no loader, full disk, corrupt keep) show."""

from __future__ import annotations

import base64
import time
from typing import Any

import httpx
import pytest

from emulator.guard import RATE_PER_MINUTE
from emulator.records import Site
from guard.client import HEADER, GuardClient, GuardRefused, GuardSilent, GuardSite, report_of
from guard.keys import FleetKeys
from guard.signing import envelope, private_key, public_key_text, signed_body
from tests.emulator import test_site_pages
from tests.emulator.abilities_harness import Dashboard
from tests.emulator.test_breakage import ability, mark, truth_of
from tests.emulator.test_site_pages import admin, healthy_site_with_plugin_update, page_url

board, web = test_site_pages.board, test_site_pages.web
KEY = private_key(base64.b64encode(b"fleet-guard-emulator-test-key!!!").decode())
OTHER = private_key(base64.b64encode(b"a-key-the-sites-were-not-built!!").decode())


async def set_guard(web: httpx.AsyncClient, board: Dashboard, site: Site, **changes: Any) -> dict[str, Any]:
    answer = await web.post("/__emulator__/guard", headers=admin(board), json={"site_id": site.id, **changes})
    assert answer.status_code == 200, answer.text
    return answer.json()["guard"]


async def broken_at_load(board: Dashboard, web: httpx.AsyncClient, armed: bool) -> tuple[Site, str, str, str]:
    """A site whose plugin update fatals at load, updated through the dashboard: (site, culprit, its old version,
    an innocent active plugin)."""
    site, slug = healthy_site_with_plugin_update(board)
    if armed:
        await set_guard(web, board, site, armed=True, keys=[public_key_text(KEY)])
    old = site.plugins[slug].version
    await mark(web, board, site, slug, "load")
    await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    innocent = next(s for s, item in site.plugins.items() if s != slug and item.active)
    return site, slug, old, innocent


def client_of(board: Dashboard, web: httpx.AsyncClient, site: Site, keys: FleetKeys | None = None) \
        -> tuple[GuardClient, GuardSite]:
    return GuardClient(web, keys or FleetKeys(KEY)), GuardSite(site.url, page_url(board, site))


async def test_an_unarmed_site_dead_at_load_stays_dead(board: Dashboard, web) -> None:
    site, slug, _, _ = await broken_at_load(board, web, armed=False)
    client, at = client_of(board, web, site)
    with pytest.raises(GuardSilent, match="no guard answered"):
        await client.probe(at, [slug])
    assert (await web.get(page_url(board, site))).status_code == 500
    paused = await ability(board, "deactivate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})
    assert paused["message"].endswith("NOMAINWP")
    assert (await truth_of(web, board, site))["guard"] is None


async def test_an_armed_guard_finds_pauses_and_puts_back_the_release_fatal_at_load(board: Dashboard, web) -> None:
    site, slug, old, innocent = await broken_at_load(board, web, armed=True)
    client, at = client_of(board, web, site)
    status = await client.status(at)
    assert status.unusable is None and status.kept_versions("plugin", slug) == [old]

    still = await client.probe(at, [innocent])
    assert not still.up and still.status == 500 and slug in still.fatal["file"]
    assert (await client.probe(at, [slug])).up
    assert (await web.get(page_url(board, site))).status_code == 500  # a probe changes nothing

    await client.pause(at, [slug])
    assert (await web.get(page_url(board, site))).status_code == 200
    synced = await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    assert synced["synced"] and site.plugins[slug].active  # the child answers; the stored option still says active
    off = await ability(board, "deactivate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})
    assert "NOMAINWP" not in str(off) and not site.plugins[slug].active
    await client.unpause(at, [slug])
    restored = await client.restore(at, "plugin", slug, old)
    assert restored.installed == old and site.plugins[slug].version == old
    on = await ability(board, "activate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})
    assert "NOMAINWP" not in str(on) and site.plugins[slug].active
    assert (await web.get(page_url(board, site))).status_code == 200
    truth = await truth_of(web, board, site)
    assert truth["front_end"]["fatal_by"] is None and truth["guard"]["paused"] == []
    assert truth["guard"]["kept"] == {f"plugin:{slug}": [old]}
    assert truth["plugins"][slug]["offer"] is not None  # WordPress offers the bad release again: the night holds it
    assert truth["fail_items"] == {f"plugin:{slug}": "load"}  # and it kills the site again if installed again


async def test_forged_expired_replayed_misdirected_and_too_many_requests_get_the_ordinary_page(
        board: Dashboard, web) -> None:
    site, slug, _, _ = await broken_at_load(board, web, armed=True)
    url = page_url(board, site)

    def pause(**changes: Any) -> bytes:
        return envelope(changes.pop("site", site.url), "pause", plugins=[slug], **changes)

    for why, body in {"forged": signed_body(OTHER, pause()),
                      "expired": signed_body(KEY, pause(ts=int(time.time()) - 600)),
                      "another site": signed_body(KEY, pause(site="https://elsewhere.example/")),
                      "oversized": b'{"envelope": "' + b"A" * 9000 + b'", "signature": ""}'}.items():
        answer = await web.post(url, content=body, headers={HEADER: "1"})
        assert answer.status_code == 500 and report_of(answer.text) is None, why
    once = signed_body(KEY, envelope(site.url, "status"))
    assert report_of((await web.post(url, content=once, headers={HEADER: "1"})).text) is not None
    assert report_of((await web.post(url, content=once, headers={HEADER: "1"})).text) is None
    assert site.guard["paused"] == []
    for _ in range(RATE_PER_MINUTE):
        await web.post(url, content=b"{}", headers={HEADER: "1"})
    with pytest.raises(GuardSilent):  # over the rate, even a good request gets the page
        await client_of(board, web, site)[0].status(GuardSite(site.url, url))


async def test_a_rotated_key_is_answered_by_guards_built_before_it(board: Dashboard, web) -> None:
    site, _, _, _ = await broken_at_load(board, web, armed=True)
    rotated, at = client_of(board, web, site, FleetKeys(OTHER, previous=KEY))
    assert (await rotated.status(at)).key == "previous"
    with pytest.raises(GuardSilent):
        await client_of(board, web, site, FleetKeys(OTHER))[0].status(at)


async def test_an_older_removed_loaderless_full_or_corrupt_guard_says_so(board: Dashboard, web) -> None:
    site, slug, old, _ = await broken_at_load(board, web, armed=True)
    client, at = client_of(board, web, site)
    await set_guard(web, board, site, version="0.9.0")
    assert "older than 1.0.0" in (await client.status(at)).unusable
    await set_guard(web, board, site, version="1.0.0", loader="the must-use folder is not writable")
    status = await client.status(at)
    assert "loader is missing" in status.unusable and "not writable" in " ".join(status.problems)
    with pytest.raises(GuardRefused, match="must-use loader is missing"):
        await client.pause(at, [slug])
    await set_guard(web, board, site, loader="placed", corrupt=[f"plugin:{slug}@{old}"])
    with pytest.raises(GuardRefused, match="corrupt"):
        await client.restore(at, "plugin", slug, old)
    await set_guard(web, board, site, disk_full=True)
    await client.pause(at, [slug])  # the site up again, so that the dashboard reaches it
    other = next(s for s, item in site.plugins.items() if item.offer and s != slug)
    await ability(board, "update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [other]})
    status = await client.status(at)
    assert status.kept_versions("plugin", other) == [] and "disk is nearly full" in " ".join(status.problems)
    await set_guard(web, board, site, removed=True)
    with pytest.raises(GuardSilent):
        await client.status(at)
