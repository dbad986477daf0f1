"""Which pages of a site are screenshotted: the home page, the pages the policy names, and the first pages of the
site's sitemap (WordPress core's `wp-sitemap.xml` index, or a plugin's `sitemap.xml`). A sitemap is the
site's own text: parsed with defusedxml, capped in size, and only same-origin addresses are taken."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx
from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from fleet.visual.policy import VisualPolicy

SITEMAPS = ("wp-sitemap.xml", "sitemap.xml")
SITEMAP_LIMIT = 1024 * 1024  # bytes read of one sitemap
SUB_SITEMAPS = 5  # of an index, followed at most
_NOT_NAME = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class PageTarget:
    name: str  # for file names and reports: `home`, `shop`, `p-12`
    url: str


def page_name(home: str, url: str) -> str:
    parts = urlsplit(url)
    relative = parts.path.removeprefix(urlsplit(home).path) + (f"-{parts.query}" if parts.query else "")
    return _NOT_NAME.sub("-", relative.lower()).strip("-")[:60] or "home"


def _same_origin(home: str, url: str) -> bool:
    a, b = urlsplit(home), urlsplit(url)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


async def _locations(http: httpx.AsyncClient, url: str) -> tuple[str, list[str]]:
    """(root tag without namespace, every <loc>) of one sitemap; ("", []) when it is missing or not a sitemap."""
    try:
        async with http.stream("GET", url, follow_redirects=True) as response:
            if response.status_code != 200:
                return "", []
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > SITEMAP_LIMIT:
                    return "", []
    except httpx.HTTPError:
        return "", []
    try:
        root = ElementTree.fromstring(body)
    except (ElementTree.ParseError, DefusedXmlException):
        return "", []
    tag = root.tag.rsplit("}", 1)[-1]
    return tag, [loc.text.strip() for loc in root.iter() if loc.tag.rsplit("}", 1)[-1] == "loc" and loc.text]


async def sitemap_urls(http: httpx.AsyncClient, home: str, limit: int) -> list[str]:
    """The first `limit` same-origin page addresses of the site's sitemap, the home page left out."""
    if limit <= 0:
        return []
    for name in SITEMAPS:
        tag, locations = await _locations(http, urljoin(home, name))
        if tag == "sitemapindex":
            pages: list[str] = []
            for sub in [loc for loc in locations if _same_origin(home, loc)][:SUB_SITEMAPS]:
                pages += (await _locations(http, sub))[1]
            locations = pages
        elif tag != "urlset":
            continue
        found = [loc for loc in dict.fromkeys(locations) if _same_origin(home, loc) and loc.rstrip("/") !=
                 home.rstrip("/")]
        return found[:limit]
    return []


async def pages_to_check(http: httpx.AsyncClient, home: str, policy: VisualPolicy) -> list[PageTarget]:
    """The home page, the policy's pages, then sitemap pages not already named, each once."""
    home = home if home.endswith("/") else home + "/"
    urls = [home, *(urljoin(home, path) for path in policy.pages)]
    urls += await sitemap_urls(http, home, policy.sitemap_pages + len(urls))
    chosen = list(dict.fromkeys(urls))[: 1 + len(policy.pages) + policy.sitemap_pages]
    return [PageTarget(page_name(home, url), url) for url in chosen]
