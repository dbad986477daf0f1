"""An HTTP probe of a site's home page: a non-2xx answer, a timeout, or a PHP fatal error served with 200 fails."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel

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
