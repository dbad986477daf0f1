"""A sitemap is the site's own text: other origins, an entity bomb, a non-sitemap and a missing one give no
pages, and a plugin's `sitemap.xml` is read where core's is missing."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from fleet.visual.pages import pages_to_check, sitemap_urls
from fleet.visual.policy import VisualPolicy

HOME = "https://shop.example/"
BOMB = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&lol2;</loc></url></urlset>')


def site(files: dict[str, str]) -> httpx.AsyncClient:
    async def serve(request) -> Response:
        body = files.get(request.path_params["name"])
        return Response(body, 200, media_type="application/xml") if body else Response("no", 404)

    app = Starlette(routes=[Route("/{name}", serve)])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=HOME)


def urlset(*locations: str) -> str:
    entries = "".join(f"<url><loc>{loc}</loc></url>" for loc in locations)
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'


async def test_only_same_origin_pages_of_a_plugins_sitemap_are_taken() -> None:
    files = {"sitemap.xml": urlset(HOME, "https://elsewhere.example/a/", "http://shop.example/b/", HOME + "c/",
                                   HOME + "d/")}
    async with site(files) as http:
        found = await sitemap_urls(http, HOME, 5)
        pages = await pages_to_check(http, HOME, VisualPolicy(pages=["c/"], sitemap_pages=1))
    assert found == [HOME + "c/", HOME + "d/"]
    assert [(p.name, p.url) for p in pages] == [("home", HOME), ("c", HOME + "c/"), ("d", HOME + "d/")]


async def test_a_hostile_or_missing_sitemap_gives_no_pages() -> None:
    for files in ({"wp-sitemap.xml": BOMB}, {"wp-sitemap.xml": "<html>not a sitemap</html>"}, {}):
        async with site(files) as http:
            assert await sitemap_urls(http, HOME, 5) == []
