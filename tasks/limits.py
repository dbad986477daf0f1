"""Prefect global concurrency limits the pipeline's write calls and nights occupy."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.asyncio import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from dashboard.block import DashboardConnection
from fleet.engine.estate import night_lock_name

ENVIRONMENT_DASHBOARD = "environment"  # the night lock's name for the dashboard of the FLEET_* environment


class NightBusy(Exception):
    """Another run of the dashboard held its night lock for longer than the wait."""


async def ensure_concurrency_limit(name: str, slots: int) -> None:
    """Create the global concurrency limit if the server does not have it yet (an existing one is kept)."""
    async with get_client() as client:
        try:
            await client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            with contextlib.suppress(ObjectAlreadyExists):  # another run created it between the read and here
                await client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=slots))


@asynccontextmanager
async def night_lock(dashboard: str, wait: float | None = None) -> AsyncIterator[None]:
    """Hold the dashboard's one-night-at-a-time lock (`fleet-night-<block>`, or `fleet-night-environment`), shared
    by its nights and its security runs; `NightBusy` after `wait` seconds (None: as long as it takes)."""
    name = night_lock_name(dashboard)
    await ensure_concurrency_limit(name, 1)
    async with AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(concurrency(name, occupy=1, timeout_seconds=wait, strict=True))
        except TimeoutError:
            raise NightBusy(f"another run of this dashboard held {name!r} for {wait:g} s") from None
        yield


def dashboard_name(dashboard: DashboardConnection | None) -> str:
    """The name a dashboard's night lock goes by: its saved block's (as `maintain-dashboards` holds it), or the
    FLEET_* environment's."""
    name = getattr(dashboard, "_block_document_name", None) if dashboard is not None else None
    return name or ENVIRONMENT_DASHBOARD
