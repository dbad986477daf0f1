"""Screenshots in the system Chromium of the emulator's real pages over a socket: an unchanged page with a
carousel is no false alarm, each visual break the emulator injects scores above `fail` and shows its failed
requests, a release's notice bar lands in review; and the pages a site is checked on come from its sitemap."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from emulator.records import Site
from emulator.site_theme import is_shop, moving_content
from emulator.testing import EmulatorServer
from fleet.visual.capture import PageCapture
from fleet.visual.diff import Band, compare
from fleet.visual.pages import PageTarget, pages_to_check
from fleet.visual.policy import Viewport, VisualPolicy
from fleet.visual.verdict import judge_pages, worst_band

POLICY = VisualPolicy(sitemap_pages=1)
BOTH = [Viewport.desktop, Viewport.mobile]


def home_of(server: EmulatorServer, site: Site) -> str:
    return server.credentials["site_url_template"].format(host=site.domain)


def site_with(server: EmulatorServer, moving: str, taken: set[int], shop: bool | None = None) -> Site:
    """A site no other test of the module took (with a shop or without, where `shop` says)."""
    site = next(s for s in server.emulator.state.sites.values()
                if s.reachable and not s.broken_by and moving_content(s) == moving and s.id not in taken
                and shop in (None, is_shop(s)))
    taken.add(site.id)
    return site


@pytest.fixture(scope="module")
def taken() -> set[int]:
    return set()


@pytest.fixture
def restored(site_server: EmulatorServer) -> Iterator[None]:
    """Lift direct visual breaks after a test."""
    yield
    for site in site_server.emulator.state.sites.values():
        if site.visual_faults:
            site.visual_faults.clear()
            site_server.emulator.state.save_site(site)


async def break_visually(server: EmulatorServer, site: Site, mode: str | None) -> None:
    token = server.emulator.config.admin_token.get_secret_value()
    async with httpx.AsyncClient(base_url=server.root_url) as web:
        answer = await web.post("/__emulator__/faults/visual", headers={"X-Emulator-Token": token},
                                json={"site_id": site.id, "mode": mode})
    assert answer.status_code == 200


async def baselines(capture: PageCapture, site: Site, pages: list[PageTarget], viewports: list[Viewport]):
    """Two views of the pages, one after the other: the server turns its banner on each view, and the page's clock
    stands still, so the pair differs where the page moves by itself, however long the machine took."""
    first = await capture.shoot(site.domain, pages, viewports, "before")
    return first, await capture.shoot(site.domain, pages, viewports, "before-2")


async def test_an_unchanged_page_with_a_carousel_is_no_false_alarm(site_server, capture, taken) -> None:
    site = site_with(site_server, "carousel", taken)
    home = [PageTarget("home", home_of(site_server, site))]
    first, second = await baselines(capture, site, home, BOTH)
    after = await capture.shoot(site.domain, home, BOTH, "after")
    verdicts = judge_pages(first, second, after, POLICY)
    # the two baselines are views one to three apart of a five-slide carousel: their first slides always differ
    unmasked = [compare(f.path, f.path, s.path, POLICY.pass_threshold, POLICY.fail_threshold)
                for f, s in zip(first, second, strict=True)]
    assert [v.band for v in verdicts] == [Band.healthy, Band.healthy]
    assert all(v.score is not None and v.score < POLICY.pass_threshold for v in verdicts)
    assert all(u.masked_pixels == 0 and u.band is not Band.healthy for u in unmasked)  # the slide did move
    assert all(v.diff is not None and v.diff.is_file() for v in verdicts)
    assert not any(v.new_console_errors or v.new_failed_requests for v in verdicts)


@pytest.mark.parametrize("mode", ["css", "blank"])
async def test_each_visual_break_scores_above_fail(site_server, capture, taken, restored, mode: str) -> None:
    site = site_with(site_server, "clock", taken)
    pages = [PageTarget("home", home_of(site_server, site)), PageTarget("about", home_of(site_server, site) + "about/")]
    # the desktop alone: a break is the page's, whatever the width (both widths are shot in the other tests here),
    # and each page load costs Chromium about 1 s of CPU
    first, second = await baselines(capture, site, pages, [Viewport.desktop])
    await break_visually(site_server, site, mode)
    after = await capture.shoot(site.domain, pages, [Viewport.desktop], f"after-{mode}")
    verdicts = judge_pages(first, second, after, POLICY)
    assert all(shot.status == 200 for shot in after)  # broken while answering 200
    assert [v.band for v in verdicts] == [Band.broken] * 2 and worst_band(verdicts) is Band.broken
    assert all(v.score is not None and v.score > POLICY.fail_threshold for v in verdicts)
    stylesheet_404 = [any(r.startswith("404 ") and "style.css" in r for r in v.new_failed_requests) for v in verdicts]
    assert stylesheet_404 == [mode == "css"] * 2
    assert all(bool(v.new_console_errors) == (mode == "css") for v in verdicts)


async def test_a_release_that_adds_a_notice_bar_lands_in_review(site_server, capture, taken, restored) -> None:
    site = site_with(site_server, "carousel", taken)
    pages = [PageTarget("home", home_of(site_server, site))]  # at both widths; a page load costs Chromium ~1 CPU-s
    first, second = await baselines(capture, site, pages, BOTH)
    await break_visually(site_server, site, "notice")
    after = await capture.shoot(site.domain, pages, BOTH, "after-notice")
    verdicts = judge_pages(first, second, after, POLICY)
    assert [v.band for v in verdicts] == [Band.review] * 2, [v.score for v in verdicts]
    assert worst_band(verdicts) is Band.review


# a shop's sitemap lists /shop/ among its pages: which site a test took once depended on the tests run before it
@pytest.mark.parametrize(("shop", "from_sitemap"), [(False, ["about", "p-2", "p-1"]), (True, ["about", "shop", "p-2"])])
async def test_a_site_is_checked_on_its_home_its_named_pages_and_its_sitemap(
        site_server, taken, shop: bool, from_sitemap: list[str]) -> None:
    site = site_with(site_server, "", taken, shop=shop)
    home = home_of(site_server, site)
    policy = VisualPolicy(pages=["/contact/"], sitemap_pages=3)
    async with httpx.AsyncClient() as http:
        pages = await pages_to_check(http, home, policy)
        none_from_sitemap = await pages_to_check(http, home, VisualPolicy(sitemap_pages=0))
    assert [p.name for p in pages] == ["home", "contact", *from_sitemap]  # contact once, pages before posts
    assert [p.url for p in pages][:2] == [home, home + "contact/"]
    assert [p.name for p in none_from_sitemap] == ["home"]


async def test_a_page_that_cannot_be_shot_says_why(capture: PageCapture, run_dir: Path) -> None:
    [shot] = await capture.shoot("nowhere", [PageTarget("home", "http://127.0.0.1:9/")], [Viewport.mobile], "x")
    assert shot.path is None and shot.error and "127.0.0.1:9" in shot.error
    assert not (run_dir / "nowhere").exists()


async def test_between_bursts_the_pages_wait_blank_and_are_reused_then_closed_once_idle(
        site_server, capture, taken) -> None:
    """A page left showing a site keeps Chromium drawing (about 5% of a core) while nothing is shot: between a night's
    looks, and for a task worker's hours between nights. Between bursts each slot's page waits on about:blank, and
    the next burst loads its pages in the same contexts (a new one is a new renderer, about 0.7 s of Chromium's CPU);
    once nothing was shot for `idle_close_s`, the contexts are closed."""
    site = site_with(site_server, "", taken)
    pages = [PageTarget("home", home_of(site_server, site))]
    shots = await capture.shoot(site.domain, pages, BOTH, "idle-after")
    assert all(shot.path is not None for shot in shots), [shot.error for shot in shots]
    assert capture._browser is not None
    kept = list(capture._browser.contexts)
    waiting = [page for context in kept for page in context.pages]
    assert waiting and [page.url for page in waiting] == ["about:blank"] * len(waiting)
    again = await capture.shoot(site.domain, pages, BOTH, "idle-again")
    assert [shot.path is not None for shot in again] == [True] * len(again)
    assert capture._browser.contexts == kept, "the next burst reuses the contexts"
    assert [page for context in kept for page in context.pages] == waiting, "and their pages"
    idle_close_s, capture.idle_close_s = capture.idle_close_s, 0.2
    try:
        await capture.shoot(site.domain, pages, [Viewport.desktop], "idle-last")
        for _ in range(100):
            if not capture._browser.contexts:
                break
            await asyncio.sleep(0.1)
        assert capture._browser.contexts == [], "closed once idle"
        [shot] = await capture.shoot(site.domain, pages, [Viewport.desktop], "idle-new")  # new contexts then
        assert shot.path is not None and len(capture._browser.contexts) == 1
    finally:
        capture.idle_close_s = idle_close_s


async def test_a_page_whose_renderer_died_while_it_waited_is_replaced_and_the_next_shot_is_whole(
        site_server, capture, taken) -> None:
    site = site_with(site_server, "", taken)
    pages = [PageTarget("home", home_of(site_server, site))]
    await capture.shoot(site.domain, pages, [Viewport.desktop], "crash-before")
    waiting = [page for context in capture._browser.contexts for page in context.pages]
    for page in waiting:
        async with page.expect_event("crash", timeout=30_000):
            with contextlib.suppress(Exception):  # the renderer dies under the navigation
                await page.goto("chrome://crash", timeout=5000)
    [shot] = await capture.shoot(site.domain, pages, [Viewport.desktop], "crash-after")
    assert shot.path is not None and shot.error is None, shot.error
