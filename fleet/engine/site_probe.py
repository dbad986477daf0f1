"""An HTTP probe of a site's home page: a non-2xx answer, a timeout, or a PHP fatal error served with 200 fails;
each site's probe before the night touches it, and after."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel

from dashboard.wire import AiohttpWire
from fleet.model.settings import PipelineSettings
from fleet.pacing.fan_out import fan_out
from fleet.rules.plan import SiteRecord

# What WordPress and PHP print when a plugin or theme broke the site (WordPress 5.2+ recovery mode, raw PHP).
FATAL_MARKERS = (
    "there has been a critical error on this website",
    "the site is experiencing technical difficulties",
    "<b>fatal error</b>:",
    "<b>parse error</b>:",
    "php fatal error",
    "fatal error: uncaught",
    "error establishing a database connection",
)
BODY_LIMIT = 256 * 1024  # enough to find an error message; a home page can be large


class ProbeResult(BaseModel):
    ok: bool
    http_code: int | None = None
    response_ms: float | None = None
    error: str | None = None
    lost: bool = False  # no answer came (a timeout, a cut connection): nothing was seen yet


def probe_url(site_url: str, template: str | None) -> str:
    """The address the probe fetches: the site's own URL, or the template filled with the site's domain."""
    if not template:
        return site_url
    return template.format(host=urlsplit(site_url).netloc)


def fatal_marker(body: str) -> str | None:
    lowered = body.lower()
    return next((marker for marker in FATAL_MARKERS if marker in lowered), None)


async def probe_home_page(http: httpx.AsyncClient, url: str) -> ProbeResult:
    """GET the home page within the client's read timeout overall (a page trickling in slowly also fails)."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(http.timeout.read), http.stream("GET", url, follow_redirects=True) as response:
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) >= BODY_LIMIT:
                    break
    except (httpx.TimeoutException, TimeoutError):
        return ProbeResult(ok=False, error=f"no answer from {url} within the timeout", lost=True)
    except (httpx.RemoteProtocolError, httpx.ReadError) as error:  # the answer was cut off
        return ProbeResult(ok=False, error=f"{url}: {type(error).__name__}: {error}", lost=True)
    except httpx.HTTPError as error:
        return ProbeResult(ok=False, error=f"{url}: {type(error).__name__}: {error}")
    elapsed = round((time.perf_counter() - started) * 1000, 1)
    code = response.status_code
    marker = fatal_marker(body.decode(response.encoding or "utf-8", errors="replace"))
    if marker:  # named whatever the status: WordPress sends its critical-error page with 500, a cache with 200
        return ProbeResult(ok=False, http_code=code, response_ms=elapsed,
                           error=f"home page shows a PHP/WordPress error ({marker!r}) with HTTP {code}")
    if not 200 <= code < 300:
        return ProbeResult(ok=False, http_code=code, response_ms=elapsed, error=f"home page answered HTTP {code}")
    return ProbeResult(ok=True, http_code=code, response_ms=elapsed)


def probe_client(settings: PipelineSettings, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """What the night asks the sites' own pages with (a visitor's plain GET, no dashboard work)."""
    return httpx.AsyncClient(transport=transport or AiohttpWire(verify=settings.verify_tls),
                             timeout=settings.probe_timeout_seconds, headers={"User-Agent": "fleet-maintenance probe"})


async def probe_sites(
    sites: list[SiteRecord], settings: PipelineSettings, transport: httpx.AsyncBaseTransport | None = None
) -> list[ProbeResult | None]:
    """The home-page probe of each site (None for every site when probing is turned off). A probe whose answer
    was lost (a timeout, a cut connection) is asked once more before it counts: a lost answer is not a broken
    site."""
    if not settings.probe_sites:
        return [None] * len(sites)
    async with probe_client(settings, transport) as http:
        async def probe(url: str) -> ProbeResult:
            first = await probe_home_page(http, url)
            return await probe_home_page(http, url) if first.lost else first

        urls = [probe_url(site.url, settings.probe_url_template) for site in sites]
        return await fan_out(urls, probe, settings.probe_concurrency)


async def probe_before_updates(
    sites: list[SiteRecord], settings: PipelineSettings, transport: httpx.AsyncBaseTransport | None = None
) -> dict[int, ProbeResult]:
    """Each site's home page before the night touches it: a site failing after is broken by the night only if
    it passed here."""
    probes = await probe_sites(sites, settings, transport)
    return {site.id: probe for site, probe in zip(sites, probes, strict=True) if probe is not None}
