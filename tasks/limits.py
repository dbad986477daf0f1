"""Prefect global concurrency limits the pipeline's write calls and nights occupy."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError, concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.logging import get_logger

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
    by its nights, its fan-out and its security runs; `NightBusy` once another run held it `wait` seconds (None: as
    long as it takes).

    Only the time the server refused the lock (423: another run holds it) counts: a busy Prefect server slow to
    answer is waited for, not taken for another night (Prefect's own `timeout_seconds` counts both, and under
    load two of three nights were reported busy after 60 s spent on a starved server's answers and retries)."""
    name = night_lock_name(dashboard)
    await ensure_concurrency_limit(name, 1)
    refused_for = 0.0
    while True:
        acquired = False
        try:
            # a lease a starved server let lapse must not cancel a night halfway through its updates
            async with concurrency(name, occupy=1, max_retries=0, strict=True, raise_on_lease_renewal_failure=False):
                acquired = True
                yield
            return
        except ConcurrencySlotAcquisitionError as error:
            answer = getattr(error.__cause__, "response", None)  # httpx's HTTPStatusError: the server's answer
            if acquired or getattr(answer, "status_code", None) != 423:
                raise
            if wait is not None and refused_for >= wait:
                raise NightBusy(f"another run of this dashboard held {name!r} for {refused_for:g} s") from None
            if not refused_for:  # said once: a killed run's lock is held until its lease lapses (300 s)
                get_logger("fleet.night_lock").warning(
                    "waiting for %r: another run of this dashboard holds it (a run killed mid-night holds it until "
                    "its lease lapses, within 5 minutes)", name)
            pause = float(answer.headers.get("Retry-After", 1.0))
            pause = pause if wait is None else max(min(pause, wait - refused_for), 0.05)
            await asyncio.sleep(pause)
            refused_for += pause


def dashboard_name(dashboard: DashboardConnection | None) -> str:
    """The name a dashboard's night lock goes by: its saved block's (as `maintain-dashboards` holds it), or the
    FLEET_* environment's."""
    name = getattr(dashboard, "_block_document_name", None) if dashboard is not None else None
    return name or ENVIRONMENT_DASHBOARD
