"""The child sites' own pages at `/__sites__/{domain}/`: healthy, offline, broken by an update (and fixed
again), the fault profiles' breaking rates, the credentials' template, and one page over a real socket; the
pages, stylesheet and sitemaps a browser screenshots, and the releases that break them visually."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest

from emulator.config import EmulatorConfig
from emulator.faults import PROFILES
from emulator.records import Site
from emulator.site_pages import CRITICAL_ERROR
from emulator.site_theme import is_shop, moving_content
from emulator.testing import EmulatorServer
from tests.emulator.abilities_harness import ROOT_URL, Dashboard, dashboard, run
from tests.emulator.test_faults import within


@pytest.fixture
async def board() -> AsyncIterator[Dashboard]:
    async with dashboard(EmulatorConfig(namespace="svc", sites=30, seed=4, time_scale=1e-6), lifespan=False) as b:
        yield b


@pytest.fixture
async def web(board: Dashboard) -> AsyncIterator[httpx.AsyncClient]:
    """No credentials: the public web, plus the admin token only where a test sends it."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL) as client:
        yield client


def admin(board: Dashboard) -> dict[str, str]:
    return {"X-Emulator-Token": board.emulator.config.admin_token.get_secret_value()}


def page_url(board: Dashboard, site: Site, path: str = "") -> str:
    template = board.credentials["site_url_template"]
    return template.format(host=site.domain).removeprefix(ROOT_URL) + path


def loads(site: Site, item_type: str, slug: str) -> bool:
    """A release breaks a site only where its code runs: core, an active plugin, the active theme."""
    items = {"plugin": site.plugins, "theme": site.themes}.get(item_type)
    return items is None or items[slug].active


def healthy_site_with_plugin_update(board: Dashboard) -> tuple[Site, str]:
    state = board.emulator.state
    for site in state.sites.values():
        if site.reachable and site.child_connected and not site.suspended and not site.broken_by:
            plugins = [u.slug for u in state.pending_updates(site, ("plugin",)) if site.plugins[u.slug].active]
            if plugins:
                return site, plugins[0]
    raise AssertionError("the generated fleet has no healthy site with a plugin update")


async def install_next_release(board: Dashboard, web: httpx.AsyncClient, site: Site, slug: str) -> httpx.Response:
    """Offer the plugin's next release, install it through the dashboard, and fetch the site's page again."""
    await web.post("/__emulator__/offers", headers=admin(board),
                   json={"site_id": site.id, "type": "plugin", "slug": slug, "version": "99.0.1"})
    async with board.client() as client:
        await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": [site.id]})
        await run(client, "svc/update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    return await web.get(page_url(board, site))


async def test_credentials_say_where_the_site_pages_are(board: Dashboard) -> None:
    assert board.credentials["site_url_template"] == f"{ROOT_URL}/__sites__/{{host}}/"


async def test_a_healthy_site_serves_its_wordpress_front_page_without_auth(board: Dashboard, web) -> None:
    site, _ = healthy_site_with_plugin_update(board)
    site.name = "Bakery <Ada> & Co"
    board.emulator.state.save_site(site)
    home = await web.get(page_url(board, site))
    deeper = await web.get(page_url(board, site, "blog/2025/hello-world/?p=1"))
    bare = await web.get(page_url(board, site).rstrip("/"))
    head = await web.head(page_url(board, site))
    www = await web.get(f"/__sites__/www.{site.domain}/")
    assert home.status_code == 200 and home.headers["content-type"].startswith("text/html")
    assert "<title>Bakery &lt;Ada&gt; &amp; Co</title>" in home.text  # escaped, never raw
    assert f'content="WordPress {site.wp_version}"' in home.text and CRITICAL_ERROR not in home.text
    assert deeper.status_code == bare.status_code == head.status_code == www.status_code == 200
    assert head.content == b""


async def test_unknown_domains_and_ids_are_not_sites(board: Dashboard, web) -> None:
    assert (await web.get("/__sites__/nowhere.example.com/")).status_code == 404
    assert (await web.get("/__sites__/1/")).status_code == 404  # a domain, not a dashboard id
    escaped = await web.get("/__sites__/%3Cscript%3E.example/")
    assert escaped.status_code == 404 and "<script>" not in escaped.text


async def test_an_offline_site_answers_503_until_it_is_back(board: Dashboard, web) -> None:
    site, _ = healthy_site_with_plugin_update(board)
    down = await web.post("/__emulator__/faults/reachable", headers=admin(board),
                          json={"site_id": site.id, "reachable": False})
    offline = await web.get(page_url(board, site))
    truth = (await web.get("/__emulator__/state", params={"site_ids": site.id}, headers=admin(board))).json()
    await web.post("/__emulator__/faults/reachable", headers=admin(board), json={"site_id": site.id, "reachable": True})
    back = await web.get(page_url(board, site))
    assert down.status_code == 200
    assert offline.status_code == 503 and "Retry-After" in offline.headers
    assert truth["sites"][str(site.id)]["front_end"] == {"status": "down", "broken": False, "broken_by": None,
                                                         "dead_at_load": False, "fatal_by": None}
    assert back.status_code == 200


async def test_updating_a_marked_item_breaks_the_front_end_until_its_next_release(board: Dashboard, web) -> None:
    site, slug = healthy_site_with_plugin_update(board)
    marked = await web.post("/__emulator__/faults/items", headers=admin(board),
                            json={"site_id": site.id, "type": "plugin", "slug": slug, "mode": "break"})
    before = await web.get(page_url(board, site))
    async with board.client() as client:
        updated = (await run(client, "svc/update-site-plugins-v1",
                             {"site_id_or_domain": site.id, "slugs": [slug]})).json()
    broken = await web.get(page_url(board, site))
    truth = (await web.get("/__emulator__/state", params={"site_ids": site.id}, headers=admin(board))).json()
    assert marked.status_code == 200 and before.status_code == 200
    assert [u["slug"] for u in updated["updated"]] == [slug]  # the update itself succeeded
    assert broken.status_code == 500 and CRITICAL_ERROR in broken.text  # WP_Fatal_Error_Handler's status
    assert "<title>WordPress &rsaquo; Error</title>" in broken.text and site.name not in broken.text
    assert truth["sites"][str(site.id)]["front_end"] == {
        "status": "broken", "broken": True, "broken_by": f"plugin:{slug}", "dead_at_load": False, "fatal_by": None}
    assert f"plugin:{slug}" not in truth["sites"][str(site.id)]["fail_items"]  # one bad release, not every one

    fixed = await install_next_release(board, web, site, slug)
    assert fixed.status_code == 200 and CRITICAL_ERROR not in fixed.text


async def test_the_ground_truth_breaks_and_fixes_a_front_end(board: Dashboard, web) -> None:
    site, _ = healthy_site_with_plugin_update(board)
    refused = await web.post("/__emulator__/faults/front-end", json={"site_id": site.id, "broken": True})
    bad = await web.post("/__emulator__/faults/front-end", headers=admin(board), json={"site_id": site.id})
    broke = await web.post("/__emulator__/faults/front-end", headers=admin(board),
                           json={"site_id": site.id, "broken": True})
    broken = await web.get(page_url(board, site))
    fixed = await web.post("/__emulator__/faults/front-end", headers=admin(board),
                           json={"site_id": site.id, "broken": False})
    healthy = await web.get(page_url(board, site))
    assert refused.status_code == 403 and bad.status_code == 400 and "broken" in bad.json()["message"]
    assert broke.json() == {"site_id": site.id, "front_end": "broken", "broken_by": "ground-truth"}
    assert CRITICAL_ERROR in broken.text
    assert fixed.json()["front_end"] == "up" and CRITICAL_ERROR not in healthy.text


async def test_site_pages_are_outside_the_dashboards_request_faults(board: Dashboard, web) -> None:
    site, _ = healthy_site_with_plugin_update(board)
    board.emulator.faults.switch(PROFILES["hostile"])
    site.reachable = True  # the switch may have taken it offline
    board.emulator.state.save_site(site)
    statuses = Counter([(await web.get(page_url(board, site))).status_code for _ in range(100)])
    assert statuses == {200: 100}
    assert board.emulator.faults.counts["requests"] == 0


@pytest.mark.parametrize("name", ["realistic", "hostile"])
async def test_profiles_break_sites_at_their_rate_deterministically(name: str) -> None:
    config = EmulatorConfig(namespace="svc", sites=1000, seed=2, time_scale=1e-6, faults=name)

    async def marks() -> tuple[set[tuple[int, str]], int, int]:
        async with dashboard(config, lifespan=False) as b:
            state = b.emulator.state
            pending = sum(len(state.pending_updates(s, respect_ignores=False)) for s in state.sites.values())
            marked = {(s.id, key) for s in state.sites.values()
                      for key, mode in s.fail_items.items() if mode in ("break", "load")}
            return marked, pending, b.emulator.faults.counts["items_breaking"]

    (first, pending, counted), (again, _, _) = await marks(), await marks()
    assert within(len(first), pending, PROFILES[name].site_breaking_rate)
    assert first == again and counted == len(first)


async def test_a_profiles_breaks_show_after_the_fleet_is_updated_and_go_on_switch() -> None:
    config = EmulatorConfig(namespace="svc", sites=200, seed=5, time_scale=1e-6, faults="hostile")
    async with dashboard(config, lifespan=False) as board:
        state = board.emulator.state
        ops = board.emulator.operations
        runnable = [s for s in state.sites.values() if s.reachable and s.child_connected and not s.suspended]
        expected = {s.id for s in runnable if any(
            s.fail_items.get(f"{u.type}:{u.slug}") in ("break", "load") and loads(s, u.type, u.slug)
            for u in state.pending_updates(s))}
        await ops.update_sites(runnable)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL) as web:
            answers = {s.id: await web.get(page_url(board, s)) for s in runnable}
            truth = (await web.get("/__emulator__/state", headers=admin(board))).json()["sites"]
            board.emulator.faults.switch(PROFILES["none"])
            after = {s.id: (await web.get(page_url(board, s))).status_code for s in runnable}
    broken = {i for i, answer in answers.items() if CRITICAL_ERROR in answer.text}
    assert expected and broken == expected
    assert all(answers[i].status_code == 500 for i in broken)  # WP_Fatal_Error_Handler's status
    assert {int(i) for i, s in truth.items() if s["front_end"]["broken"]} == expected
    assert set(after.values()) == {200}


async def test_site_pages_over_a_real_socket() -> None:
    async with EmulatorServer(EmulatorConfig(sites=5, seed=1)) as server:
        site = next(s for s in server.emulator.state.sites.values() if s.reachable)
        url = server.credentials["site_url_template"].format(host=site.domain)
        async with httpx.AsyncClient() as client:
            healthy = await client.get(url)
            server.emulator.operations.set_front_end_broken(site, True)
            broken = await client.get(url + "wp-admin/")
            server.emulator.operations.set_reachable(site, False)
            down = await client.get(url)
    assert healthy.status_code == 200 and f"<title>{site.name}</title>" in healthy.text
    assert broken.status_code == 500 and CRITICAL_ERROR in broken.text  # WP_Fatal_Error_Handler's status
    assert down.status_code == 503


# ---- the pages a browser screenshots, and releases that break them visually --------------------------------


async def test_a_site_serves_its_pages_stylesheet_and_sitemaps(board: Dashboard, web) -> None:
    site, _ = healthy_site_with_plugin_update(board)
    site.posts[0].title = "Cakes <b>& more</b>"
    board.emulator.state.save_site(site)
    home = await web.get(page_url(board, site))
    stylesheet_href = re.search(r'rel="stylesheet" id="theme-style-css" href="([^"]+)"', home.text).group(1)
    stylesheet = await web.get(stylesheet_href)
    about, contact, shop = [await web.get(page_url(board, site, p)) for p in ("about/", "contact/", "shop/")]
    post = await web.get(page_url(board, site, f"?p={site.posts[0].id}"))
    index = await web.get(page_url(board, site, "wp-sitemap.xml"))
    redirect = await web.get(page_url(board, site, "sitemap.xml"))
    locations = re.findall(r"<loc>([^<]+)</loc>", index.text)
    pages_map = await web.get(locations[0].removeprefix(ROOT_URL))
    posts_map = await web.get(locations[1].removeprefix(ROOT_URL))
    theme = next(t for t in site.themes.values() if t.active)
    assert stylesheet_href.startswith(page_url(board, site)) and f"/themes/{theme.slug}/style.css" in stylesheet_href
    assert stylesheet.status_code == 200 and stylesheet.headers["content-type"].startswith("text/css")
    assert "body{" in stylesheet.text
    assert about.status_code == contact.status_code == 200 and "<title>About us &#8211;" in about.text
    shops = [s for s in board.emulator.state.sites.values() if is_shop(s)]
    shop_home = await web.get(page_url(board, shops[0]))
    assert f'href="{page_url(board, shops[0], "shop/")}"' in shop_home.text
    assert ("shop/" in home.text) == is_shop(site) and shop.status_code == 200  # elsewhere, the front page
    assert "Cakes &lt;b&gt;&amp; more&lt;/b&gt;" in post.text and "<b>&" not in post.text
    assert index.headers["content-type"].startswith("application/xml") and "<sitemapindex" in index.text
    assert redirect.status_code == 301 and redirect.headers["location"].endswith("/wp-sitemap.xml")
    assert [re.sub(r".*/__sites__/[^/]+/", "", loc) for loc in re.findall(r"<loc>([^<]+)</loc>", pages_map.text)][
        :3] == ["", "about/", "contact/"]
    assert f"?p={site.posts[0].id}</loc>" in posts_map.text and "&lt;" not in posts_map.text


async def test_the_ground_truth_breaks_a_page_visually_while_it_answers_200(board: Dashboard, web) -> None:
    site, _ = healthy_site_with_plugin_update(board)
    healthy = await web.get(page_url(board, site))
    stylesheet_href = re.search(r'id="theme-style-css" href="([^"]+)"', healthy.text).group(1)
    refused = await web.post("/__emulator__/faults/visual", json={"site_id": site.id, "mode": "css"})
    bad = await web.post("/__emulator__/faults/visual", headers=admin(board), json={"site_id": site.id, "mode": "x"})
    css = await web.post("/__emulator__/faults/visual", headers=admin(board), json={"site_id": site.id, "mode": "css"})
    css_page, css_sheet = await web.get(page_url(board, site)), await web.get(stylesheet_href)
    await web.post("/__emulator__/faults/visual", headers=admin(board), json={"site_id": site.id, "mode": "blank"})
    blank_page, blank_sheet = await web.get(page_url(board, site)), await web.get(stylesheet_href)
    truth = (await web.get("/__emulator__/state", params={"site_ids": site.id}, headers=admin(board))).json()
    lifted = await web.post("/__emulator__/faults/visual", headers=admin(board),
                            json={"site_id": site.id, "mode": None})
    back = await web.get(stylesheet_href)
    assert refused.status_code == 403 and bad.status_code == 400 and "mode" in bad.json()["message"]
    assert css.json()["visual"]["break"] == "css"
    assert css_page.status_code == 200 and stylesheet_href in css_page.text and css_sheet.status_code == 404
    assert blank_page.status_code == 200 and blank_sheet.status_code == 200 and "<main></main>" in blank_page.text
    assert '<section class="hero">' in healthy.text and '<section class="hero">' not in blank_page.text
    assert truth["sites"][str(site.id)]["visual"] == {
        "break": "blank", "by": "ground-truth", "marked": {"ground-truth": {"mode": "blank", "version": ""}}}
    assert truth["sites"][str(site.id)]["front_end"]["status"] == "up"  # a visual break is not a fatal error
    assert lifted.json()["visual"]["break"] is None and back.status_code == 200


async def test_a_marked_release_breaks_the_page_once_installed_until_the_next_release(board: Dashboard, web) -> None:
    site, slug = healthy_site_with_plugin_update(board)
    offered = site.plugins[slug].offer
    marked = await web.post("/__emulator__/faults/visual", headers=admin(board),
                            json={"site_id": site.id, "type": "plugin", "slug": slug, "mode": "blank"})
    before = await web.get(page_url(board, site))
    async with board.client() as client:
        await run(client, "svc/update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
    broken = await web.get(page_url(board, site))
    nothing_to_mark = await web.post("/__emulator__/faults/visual", headers=admin(board),
                                     json={"site_id": site.id, "type": "plugin", "slug": slug, "mode": "css"})
    fixed = await install_next_release(board, web, site, slug)
    assert marked.json()["visual"] == {"break": None, "by": None,
                                       "marked": {f"plugin:{slug}": {"mode": "blank", "version": offered}}}
    assert before.status_code == 200 and '<section class="hero">' in before.text
    assert broken.status_code == 200 and "<main></main>" in broken.text and CRITICAL_ERROR not in broken.text
    assert nothing_to_mark.status_code == 409
    assert '<section class="hero">' in fixed.text


async def test_a_deactivated_plugins_visual_break_goes_with_it(board: Dashboard, web) -> None:
    site, slug = healthy_site_with_plugin_update(board)
    await web.post("/__emulator__/faults/visual", headers=admin(board),
                   json={"site_id": site.id, "type": "plugin", "slug": slug, "mode": "css"})

    async def stylesheet_status() -> int:
        page = await web.get(page_url(board, site))
        href = re.search(r'id="theme-style-css" href="([^"]+)"', page.text).group(1)
        return (await web.get(href)).status_code

    async with board.client() as client:
        await run(client, "svc/update-site-plugins-v1", {"site_id_or_domain": site.id, "slugs": [slug]})
        broken = await stylesheet_status()
        await run(client, "svc/deactivate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})
        off = await stylesheet_status()
        off_truth = (await web.get("/__emulator__/state", headers=admin(board))).json()["sites"][str(site.id)]
        await run(client, "svc/activate-site-plugins-v1", {"site_id_or_domain": site.id, "plugins": [slug]})
        on_again = await stylesheet_status()
    assert (broken, off, on_again) == (404, 200, 404)  # CSS gone while the plugin's code runs
    assert off_truth["visual"]["break"] is None and off_truth["visual"]["marked"][f"plugin:{slug}"]["mode"] == "css"


async def test_the_carousel_shows_another_first_slide_on_each_view(board: Dashboard, web) -> None:
    site = next(s for s in board.emulator.state.sites.values() if moving_content(s) == "carousel" and s.reachable)
    firsts = [re.search(r'class="slide active"[^>]*>([^<]+)<', (await web.get(page_url(board, site))).text).group(1)
              for _ in range(3)]
    assert len(set(firsts)) == 3


@pytest.mark.parametrize("name", ["realistic", "hostile"])
async def test_profiles_mark_visual_breaks_at_their_rate_and_lift_them_on_switch(name: str) -> None:
    config = EmulatorConfig(namespace="svc", sites=1000, seed=2, time_scale=1e-6, faults=name)

    async def marks() -> tuple[set[tuple[int, str, str]], int, Dashboard]:
        async with dashboard(config, lifespan=False) as b:
            state = b.emulator.state
            pending = sum(1 for s in state.sites.values() for u in state.pending_updates(s, respect_ignores=False)
                          if u.type != "translation")
            marked = {(s.id, key, mode) for s in state.sites.values() for key, (mode, _) in s.visual_faults.items()}
            assert b.emulator.faults.counts["items_breaking_visually"] == len(marked)
            b.emulator.faults.switch(PROFILES["none"])
            assert not any(s.visual_faults for s in state.sites.values())
            return marked, pending, b

    (first, pending, _), (again, _, _) = await marks(), await marks()
    assert within(len(first), pending, PROFILES[name].visual_break_rate)
    assert first == again and {mode for _, _, mode in first} == {"css", "blank"}
