"""Prefect global concurrency limits the pipeline's write calls and nights occupy."""

from __future__ import annotations

import contextlib

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound


async def ensure_concurrency_limit(name: str, slots: int) -> None:
    """Create the global concurrency limit if the server does not have it yet (an existing one is kept)."""
    async with get_client() as client:
        try:
            await client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            with contextlib.suppress(ObjectAlreadyExists):  # another run created it between the read and here
                await client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=slots))
