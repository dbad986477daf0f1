"""The one pager: reads every page of a list, whatever tells the total.

REST v2 lists carry the grand total in the body (`total`), the abilities list sends `X-WP-Total`, the list
abilities carry `total` in their output, and some lists carry nothing (then pages are read until a short
one). With a known total the remaining pages are fetched concurrently, within a small bound.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from dashboard.errors import InvalidResponse

T = TypeVar("T")

MAX_PAGES = 10_000


@dataclass
class Page(Generic[T]):
    items: list[T]
    total: int | None = None


async def collect_pages(
    fetch: Callable[[int, int], Awaitable[Page[T]]],
    *,
    per_page: int,
    concurrency: int = 4,
    what: str = "list",
) -> list[T]:
    """Every item of a paginated list, in page order. `fetch(page, per_page)` reads one page.

    A total only sets how many pages are read concurrently; reading goes on while pages come back full,
    so a route whose `total` turns out to count the page rather than the list still yields everything.
    """
    first = await fetch(1, per_page)
    items = list(first.items)
    pages = [first]
    if first.total is not None and per_page:
        count = math.ceil(first.total / per_page)
        if count > MAX_PAGES:
            raise InvalidResponse(f"{what}: the dashboard claims {first.total} items, more than this client reads")
        limit = asyncio.Semaphore(concurrency)

        async def bounded(page: int) -> Page[T]:
            async with limit:
                return await fetch(page, per_page)

        pages += await asyncio.gather(*(bounded(n) for n in range(2, count + 1)))
        for page in pages[1:]:
            items.extend(page.items)
    while len(pages[-1].items) >= per_page > 0:
        if len(pages) >= MAX_PAGES:
            raise InvalidResponse(f"{what}: more than {MAX_PAGES} pages; the dashboard seems to ignore `page`")
        pages.append(await fetch(len(pages) + 1, per_page))
        if pages[-1].items == pages[-2].items:
            raise InvalidResponse(f"{what}: page {len(pages)} repeats page {len(pages) - 1}; `page` is ignored")
        items.extend(pages[-1].items)
    return items
