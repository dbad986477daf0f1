"""Run one coroutine per element with a bound on how many are in flight (per-site work inside one task)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def fan_out(elements: Iterable[T], work: Callable[[T], Awaitable[R]], limit: int) -> list[R]:
    """Results in the order of `elements`; at most `limit` calls of `work` run at once."""
    gate = asyncio.Semaphore(limit)

    async def bounded(element: T) -> R:
        async with gate:
            return await work(element)

    return list(await asyncio.gather(*(bounded(element) for element in elements)))


def chunked(values: list[T], size: int) -> list[list[T]]:
    return [values[start : start + size] for start in range(0, len(values), size)]
