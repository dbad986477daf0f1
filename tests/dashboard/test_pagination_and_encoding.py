"""The pager and the ability input encoding as plain functions (the emulator tests exercise them over HTTP)."""

from __future__ import annotations

import pytest

from dashboard.abilities import encode_input, query_pairs
from dashboard.errors import InvalidResponse
from dashboard.models import Ability
from dashboard.pagination import Page, collect_pages

ROWS = list(range(1, 451))


def pager(total_of: str) -> tuple[list[tuple[int, int]], object]:
    calls: list[tuple[int, int]] = []

    async def fetch(page: int, size: int) -> Page[int]:
        calls.append((page, size))
        chunk = ROWS[(page - 1) * size: page * size]
        total = {"grand": len(ROWS), "page": len(chunk), "none": None}[total_of]
        return Page(chunk, total)

    return calls, fetch


@pytest.mark.parametrize("total_of", ["grand", "page", "none"])
async def test_every_item_once_in_order_whatever_the_total_means(total_of: str) -> None:
    calls, fetch = pager(total_of)
    assert await collect_pages(fetch, per_page=100) == ROWS
    assert sorted(page for page, _ in calls) == [1, 2, 3, 4, 5]


async def test_a_dashboard_ignoring_page_is_caught() -> None:
    async def same(page: int, size: int) -> Page[int]:
        return Page(ROWS[:size], None)

    with pytest.raises(InvalidResponse, match="repeats"):
        await collect_pages(same, per_page=100)


def ability(readonly: bool, destructive: bool = False, idempotent: bool = False, schema_type: object = "object"
            ) -> Ability:
    return Ability.from_body({"name": "svc/x-v1", "input_schema": {"type": schema_type}, "meta": {"annotations": {
        "readonly": readonly, "destructive": destructive, "idempotent": idempotent}}})


def test_method_and_encoding_follow_the_annotations() -> None:
    data = {"site_ids_or_domains": [1, "a.example"], "types": ["plugins"], "include_stats": True, "x": None}
    read = ability(readonly=True)
    assert read.run_method == "GET"
    assert encode_input(read, data) == ([("input[site_ids_or_domains][0]", "1"),
                                         ("input[site_ids_or_domains][1]", "a.example"),
                                         ("input[types][0]", "plugins"), ("input[include_stats]", "true")], None)
    delete = ability(readonly=False, destructive=True, idempotent=True)
    assert delete.run_method == "DELETE" and encode_input(delete, {"tag_id": 3})[0] == [("input[tag_id]", "3")]
    write = ability(readonly=False, destructive=True)
    assert write.run_method == "POST" and encode_input(write, {"a": 1}) == (None, {"input": {"a": 1}})
    assert encode_input(ability(readonly=False, schema_type=["object", "null"]), None) == (None, {})
    assert encode_input(ability(readonly=True), None) == ([("input", "{}")], None)


def test_query_pairs_nest() -> None:
    assert query_pairs({"a": {"b": [False]}}) == [("input[a][b][0]", "false")]
