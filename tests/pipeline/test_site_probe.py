"""The home-page probe: 2xx passes; non-2xx, timeouts and PHP fatal errors served with 200 fail."""

from __future__ import annotations

import asyncio

import httpx
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.routing import Route

from fleet.engine.site_probe import probe_home_page


async def page(request):
    host = request.headers["host"]
    if host == "fine.example":
        return HTMLResponse("<html><body>Welcome</body></html>")
    if host == "fatal.example":
        return HTMLResponse("<p>There has been a critical error on this website.</p>", status_code=200)
    if host == "fatal-500.example":  # WP_Fatal_Error_Handler's own status
        return HTMLResponse("<p>There has been a critical error on this website.</p>", status_code=500)
    if host == "raw-php.example":
        return HTMLResponse("<br />\n<b>Fatal error</b>:  Uncaught Error: Call to undefined function", 200)
    if host == "moved.example":
        return RedirectResponse("http://fine.example/", status_code=301)
    if host == "slow.example":
        await asyncio.sleep(1)
        return HTMLResponse("late")
    return HTMLResponse("Service Unavailable", status_code=503)


SITES = Starlette(routes=[Route("/", page)])


async def probe(url: str, timeout: float = 5.0):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=SITES), timeout=timeout) as http:
        return await probe_home_page(http, url)


async def test_healthy_page_and_redirects_pass():
    result = await probe("http://fine.example/")
    assert result.ok and result.http_code == 200 and result.response_ms is not None
    assert (await probe("http://moved.example/")).ok


async def test_fatal_error_pages_served_with_200_fail():
    critical = await probe("http://fatal.example/")
    assert not critical.ok and critical.http_code == 200
    assert "critical error on this website" in critical.error
    assert not (await probe("http://raw-php.example/")).ok


async def test_a_critical_error_page_sent_with_500_is_named_as_one():
    critical = await probe("http://fatal-500.example/")
    assert not critical.ok and critical.http_code == 500
    assert "critical error on this website" in critical.error and "HTTP 500" in critical.error


async def test_non_2xx_and_timeouts_fail():
    down = await probe("http://down.example/")
    assert (down.ok, down.http_code, down.error) == (False, 503, "home page answered HTTP 503")
    slow = await probe("http://slow.example/", timeout=0.05)
    assert not slow.ok and "within the timeout" in slow.error


async def test_a_probe_whose_answer_was_lost_is_asked_once_more_before_it_counts():
    """A site slow only the first time (its answer lost to the timeout) passes; one that never answers fails."""
    from fleet.engine.site_probe import probe_sites
    from fleet.model.settings import PipelineSettings
    from fleet.rules.plan import SiteRecord

    asked: dict[str, int] = {}

    async def sometimes_slow(request):
        host = request.headers["host"]
        asked[host] = asked.get(host, 0) + 1
        if host == "once.example" and asked[host] == 1 or host == "never.example":
            await asyncio.sleep(1)
        return HTMLResponse("<html><body>Welcome</body></html>")

    sites = [SiteRecord(id=1, url="http://once.example/", name="once"),
             SiteRecord(id=2, url="http://never.example/", name="never"),
             SiteRecord(id=3, url="http://fatal.example/", name="fatal")]
    settings = PipelineSettings(probe_timeout_seconds=0.05)
    web = Starlette(routes=[Route("/", sometimes_slow)])
    once, never = await probe_sites(sites[:2], settings, httpx.ASGITransport(app=web))
    assert once.ok and asked["once.example"] == 2  # lost, then answered
    assert not never.ok and never.lost and asked["never.example"] == 2  # asked twice, never more
    [fatal] = await probe_sites(sites[2:], settings, httpx.ASGITransport(app=SITES))
    assert not fatal.ok and not fatal.lost  # a page that was seen failing is not asked again
