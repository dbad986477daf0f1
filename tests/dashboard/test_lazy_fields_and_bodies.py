"""What the cheap paths of the client must not change: JSON-text site fields are decoded only when read (and a
bad one is None for its site alone, as before), one bad row still only skips itself, and bodies pydantic-core
refuses (a byte-order mark, a lone surrogate) are still read. Served by a small dashboard over httpx's ASGI
transport, so the answers go through the client's whole HTTP path."""

from __future__ import annotations

import codecs
import json
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from dashboard import DashboardClient
from dashboard.models import Site

PLUGINS = [{"slug": "akismet/akismet.php", "name": "Akismet", "version": "5.3"}]
SITES = [
    {"id": "1", "url": "https://one.example/", "name": "One", "tags": {"3": "Shop"}, "client_id": "2",
     "suspended": "0", "status": "connected", "child_version": "5.4", "plugins": json.dumps(PLUGINS),
     "plugin_upgrades": "", "themes": "[]", "stats": None},
    {"id": "2", "url": "https://two.example/", "name": "Two", "plugins": "[{\"slug\": broken",
     "wp_upgrades": "{\"current\": \"6.8\", \"new\": \"6.9\"}"},
    {"url": "https://no-id.example/", "name": "No id"},
]


def dashboard_answering(body: bytes) -> httpx.ASGITransport:
    async def sites(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return httpx.ASGITransport(Starlette(routes=[Route("/wp-json/svc/v2/sites", sites)]))


def client_for(transport: httpx.ASGITransport) -> DashboardClient:
    return DashboardClient.from_credentials(
        {"base_url": "http://dash.test/wp-json", "namespace": "svc", "api_keys": {"read_write": "k==v"}},
        transport=transport,
    )


def listing(rows: list[dict[str, Any]]) -> bytes:
    return json.dumps({"success": 1, "total": 2, "data": rows}).encode()


async def test_json_text_fields_are_decoded_when_read_and_a_bad_one_is_none_for_its_site_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with client_for(dashboard_answering(listing(SITES))) as dashboard:
        one, two = await dashboard.list_sites()
    assert (one.id, one.url, one.name, one.client_id, one.tags, one.suspended, one.status, one.child_version) == (
        1, "https://one.example/", "One", 2, {3: "Shop"}, False, "connected", "5.4")
    assert "plugins" not in one.__dict__ and one.raw_plugins == json.dumps(PLUGINS)  # kept as sent until read
    assert one.plugins == PLUGINS and one.plugins is one.plugins  # decoded once
    assert one.plugin_upgrades is None and one.themes == [] and one.translation_upgrades is None
    assert two.plugins is None and two.wp_upgrades == {"current": "6.8", "new": "6.9"}
    assert any("skipped Site row 2" in r.getMessage() and "id" in r.getMessage() for r in caplog.records)


async def test_dumps_and_construction_use_the_plain_names() -> None:
    async with client_for(dashboard_answering(listing(SITES[:2]))) as dashboard:
        one, two = await dashboard.list_sites()
    dumped = one.model_dump(mode="json")
    assert dumped["plugins"] == PLUGINS and dumped["wp_upgrades"] is None
    assert not any(key.startswith("raw_") for key in dumped) and "raw_plugins" not in repr(one)
    assert Site.model_validate(dumped).plugins == PLUGINS
    assert two.model_dump()["plugins"] is None
    assert Site(id=5, url="https://five.example/", plugins=PLUGINS).plugins == PLUGINS


@pytest.mark.parametrize(
    "body",
    [codecs.BOM_UTF8 + listing(SITES[:2]), listing(SITES[:1])[:-2] + b', {"id": "2", "url": "u", "name": "\\ud800"}]}'],
    ids=["byte-order-mark", "lone-surrogate"],
)
async def test_bodies_pydantic_core_refuses_are_still_read(body: bytes) -> None:
    async with client_for(dashboard_answering(body)) as dashboard:
        sites = await dashboard.list_sites()
    assert [s.id for s in sites] == [1, 2] and sites[0].plugins == PLUGINS
