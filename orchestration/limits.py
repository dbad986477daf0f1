"""What a run holds while it writes to a dashboard: the dashboard's night lock, and the Prefect global concurrency
limits its write calls occupy."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from uuid import uuid4

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.asyncio import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.logging import get_logger
from prefect.runtime import flow_run
from prefect.states import Crashed

from fleet.state.dashboard_memory import DashboardMemory
from fleet.state.night_lock import RENEW, Holder, NightBusy, NightLock, Taken
from fleet.state.processes import RunProcess

LOCK_POLL_SECONDS = 2.0  # how often a waiting run asks again (a holder found dead frees the lock at once)


async def ensure_concurrency_limit(name: str, slots: int) -> None:
    """Create the global concurrency limit if the server does not have it yet (an existing one is kept)."""
    async with get_client() as client:
        try:
            await client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            with contextlib.suppress(ObjectAlreadyExists):  # another run created it between the read and here
                await client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=slots))


def write_slot(limit: str) -> AbstractAsyncContextManager[object]:
    """One slot of the global concurrency limit `limit`, held while a write call is sent to the dashboard."""
    return concurrency(limit, occupy=1, strict=False)


@asynccontextmanager
async def night_lock(memory: DashboardMemory, what: str, wait: float | None = None) -> AsyncIterator[Holder]:
    """Hold the dashboard's one-run-at-a-time lock (`fleet.state.night_lock`), shared by its nights, its fan-out
    and its security runs; `NightBusy` once another live run held it `wait` seconds (None: as long as it takes).

    A waiting run says once who holds it. A holder found dead (its process gone, or its lease lapsed on another
    machine) gives the lock up at once, and its Prefect flow run, still Running, is marked Crashed."""
    lock = NightLock(memory.lock_path)
    run_id = flow_run.get_id()
    me = Holder(run=run_id or uuid4().hex, what=flow_run.get_flow_name() or what, process=RunProcess.this(),
                since=datetime.now(UTC), flow_run_id=run_id)
    logger = get_logger("fleet.night_lock")
    waited, said = 0.0, False
    while not isinstance(outcome := await asyncio.to_thread(lock.take, me), Taken):
        if wait is not None and waited >= wait:
            raise NightBusy(f"the night lock of {memory.base_url} was held by {outcome.holder.said()} for "
                            f"{waited:g} s (the wait's bound): this {what} run did not start")
        if not said:
            logger.warning("waiting for the night lock of %s: held by %s", memory.base_url, outcome.holder.said())
            said = True
        pause = LOCK_POLL_SECONDS if wait is None else max(min(LOCK_POLL_SECONDS, wait - waited), 0.05)
        await asyncio.sleep(pause)
        waited += pause
    if outcome.replaced is not None:
        dead = outcome.replaced
        logger.warning("the night lock of %s was held by %s, whose process is gone: taken over", memory.base_url,
                       dead.said())
        if dead.flow_run_id:
            await mark_crashed(dead.flow_run_id, f"its process {dead.process.pid} on {dead.process.host} was gone "
                               f"when the {what} run {me.run} found it holding the night lock")
    renewing = asyncio.create_task(_renew(lock, me))
    try:
        yield me
    finally:
        renewing.cancel()
        await asyncio.to_thread(lock.release, me)


async def _renew(lock: NightLock, me: Holder) -> None:
    """The lease that tells runs on other machines this one is alive."""
    while True:
        await asyncio.sleep(RENEW.total_seconds())
        if not await asyncio.to_thread(lock.renew, me):
            get_logger("fleet.night_lock").warning("the night lock was taken from this run (taken for dead)")
            return


async def mark_crashed(flow_run_id: str, why: str) -> None:
    """A killed run's Prefect flow run, left Running (or Pending) by its process, told as Crashed: so that the
    Prefect UI and `fleet runs` tell the truth about it. A run another Prefect server knows is left alone."""
    async with get_client() as client:
        try:
            run = await client.read_flow_run(flow_run_id)
        except ObjectNotFound:
            return
        if run.state is None or run.state.is_final():
            return
        await client.set_flow_run_state(flow_run_id, Crashed(message=f"Killed: {why}"), force=True)
