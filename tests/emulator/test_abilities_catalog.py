"""Discovery over HTTP: the catalog equals the reference `abilities.json` (namespace applied), pagination,
categories, and one ability."""

from __future__ import annotations

import json

import pytest

from emulator.config import EmulatorConfig
from tests.emulator.abilities_harness import dashboard
from tests.reference import ABILITIES


@pytest.fixture
async def svc():
    async with dashboard(EmulatorConfig(namespace="svc", sites=3, seed=1), lifespan=False) as board:
        yield board


def renamed(name: str) -> str:
    return name.replace("mainwp/", "svc/", 1).replace("mainwp-", "svc-", 1)


async def test_catalog_equals_reference_with_namespace_applied(svc) -> None:
    reference = json.loads(ABILITIES.read_text())
    async with svc.client() as client:
        response = await client.get("/abilities", params={"per_page": 100})
    assert response.status_code == 200
    listed = response.json()
    assert [a["name"] for a in listed] == [renamed(a["name"]) for a in reference]
    for ours, real in zip(listed, reference, strict=True):
        assert ours["category"] == renamed(real["category"]), ours["name"]
        assert ours["meta"]["annotations"] == real["meta"]["annotations"], ours["name"]
        assert ours["label"] == real["label"]
        ours_required = ours["input_schema"].get("required", []) if isinstance(ours["input_schema"], dict) else []
        real_required = real["input_schema"].get("required", []) if isinstance(real["input_schema"], dict) else []
        assert ours_required == real_required, ours["name"]
        assert ours["output_schema"] == real["output_schema"], ours["name"]
        assert "mainwp/" not in json.dumps(ours["_links"])
    counts: dict[str, int] = {}
    for ability in listed:
        counts[ability["category"]] = counts.get(ability["category"], 0) + 1
    assert counts == {"site": 2, "svc-sites": 30, "svc-updates": 13, "svc-clients": 11, "svc-tags": 7,
                      "svc-batch": 1}


async def test_namespace_mainwp_keeps_the_real_names() -> None:
    async with dashboard(EmulatorConfig(namespace="mainwp", sites=1), lifespan=False) as board, \
            board.client() as client:
        names = [a["name"] for a in (await client.get("/abilities", params={"per_page": 100})).json()]
        categories = [c["slug"] for c in (await client.get("/categories")).json()]
    assert "mainwp/get-batch-job-status-v1" in names and not any(n.startswith("svc/") for n in names)
    assert categories == ["site", "user", "mainwp-sites", "mainwp-updates", "mainwp-clients", "mainwp-tags",
                          "mainwp-batch"]


@pytest.mark.parametrize(
    ("query", "status", "count", "total_pages", "link_rels"),
    [
        ({}, 200, 50, "2", ['rel="next"']),
        ({"page": 2}, 200, 14, "2", ['rel="prev"']),
        ({"page": 3}, 200, 0, "2", ['rel="prev"']),
        ({"per_page": 100}, 200, 64, "1", []),
        ({"per_page": 10, "page": 3}, 200, 10, "7", ['rel="prev"', 'rel="next"']),
        ({"per_page": 101}, 400, None, None, None),
        ({"per_page": 0}, 400, None, None, None),
        ({"page": 0}, 400, None, None, None),
        ({"page": "two"}, 400, None, None, None),
    ],
)
async def test_list_pagination(svc, query, status, count, total_pages, link_rels) -> None:
    async with svc.client() as client:
        response = await client.get("/abilities", params=query)
    assert response.status_code == status, response.text
    if status != 200:
        body = response.json()
        assert body["code"] == "rest_invalid_param"
        (param,) = body["data"]["params"]
        assert param in query
        assert body["data"]["details"][param]["code"] in ("rest_out_of_bounds", "rest_invalid_type")
        return
    assert len(response.json()) == count
    assert response.headers["X-WP-Total"] == "64"
    assert response.headers["X-WP-TotalPages"] == total_pages
    link = response.headers.get("Link", "")
    assert [rel for rel in ('rel="prev"', 'rel="next"') if rel in link] == link_rels
    if "per_page" in query and link_rels:
        assert f"per_page={query['per_page']}" in link


@pytest.mark.parametrize(("category", "count"), [("svc-sites", 30), ("svc-updates", 13), ("svc-clients", 11),
                                                 ("svc-tags", 7), ("svc-batch", 1), ("site", 2), ("user", 0),
                                                 ("nope", 0)])
async def test_list_by_category(svc, category, count) -> None:
    async with svc.client() as client:
        response = await client.get("/abilities", params={"category": category, "per_page": 100})
    assert response.status_code == 200
    assert len(response.json()) == count
    assert response.headers["X-WP-Total"] == str(count)
    assert {a["category"] for a in response.json()} <= {category}


async def test_categories_and_one_ability(svc) -> None:
    async with svc.client() as client:
        categories = await client.get("/categories")
        one = await client.get("/categories/svc-tags")
        missing_category = await client.get("/categories/nope")
        ability = await client.get("/abilities/svc/get-site-v1")
        unknown = await client.get("/abilities/svc/no-such-ability-v1")
        index = await client.get("")
    assert categories.status_code == 200 and len(categories.json()) == 7
    assert categories.headers["X-WP-Total"] == "7"
    assert one.json()["slug"] == "svc-tags"
    assert one.json()["_links"]["abilities"][0]["href"].endswith("/abilities?category=svc-tags")
    assert missing_category.status_code == 404
    body = ability.json()
    assert body["name"] == "svc/get-site-v1" and body["input_schema"]["required"] == ["site_id_or_domain"]
    assert body["_links"]["wp:action-run"][0]["href"] == "http://emulator.test/wp-json/wp-abilities/v1/abilities/svc/get-site-v1/run"
    assert unknown.status_code == 404
    assert index.json()["namespace"] == "wp-abilities/v1" and "/wp-abilities/v1/categories" in index.json()["routes"]
    assert unknown.json() == {"code": "rest_ability_not_found", "message": "Ability not found.",
                              "data": {"status": 404}}
