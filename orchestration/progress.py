"""Where progress goes: the run's log (or a plain logger outside a run), the night's progress artifact and each
batch job's while it is waited on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import acreate_progress_artifact, aupdate_progress_artifact
from prefect.exceptions import MissingContextError

from dashboard.models import JobStatus
from fleet.engine.batch_jobs import wait_for_batch_job
from fleet.model.settings import PipelineSettings
from fleet.model.vocabulary import count
from fleet.pacing.progress import NightProgress
from fleet.rules.execution import JobOutcome

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


def step_logger() -> logging.Logger | logging.LoggerAdapter:
    """The Prefect run logger inside a flow or task run, else the `fleet` logger (plain function calls)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("fleet")


class NightArtifact:
    """One Prefect progress artifact for the night: sites synced, items applied, sites checked.

    Sent at most once per `every` seconds, and only when something moved: one API call per dashboard call was
    most of the night's own CPU.
    """

    def __init__(self, progress: NightProgress, every: float) -> None:
        self.progress = progress
        self.every = every
        self._id: UUID | None = None
        self._loop: asyncio.Task | None = None
        self._dirty = False

    async def open(self) -> None:
        self._id = await acreate_progress_artifact(0.0, key="night-progress", description=self.progress.describe())
        self.progress.changed = self._touch
        self._loop = asyncio.create_task(self._send_every())

    def _touch(self, _: NightProgress) -> None:
        self._dirty = True

    async def _send(self) -> None:
        self._dirty = False
        await aupdate_progress_artifact(artifact_id=self._id, progress=self.progress.percent(),
                                        description=self.progress.describe())

    async def _send_every(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            if self._dirty:
                await self._send()

    async def close(self) -> None:
        self.progress.changed = None
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        if self._id is not None:
            await self._send()


async def watch_batch_job(
    client: DashboardClient, job_id: str, kind: str, site_ids: list[int], settings: PipelineSettings
) -> JobOutcome:
    """The sensor (`fleet.engine.batch_jobs`) as a Prefect task, with a progress artifact updated while it waits."""
    artifact: UUID = await acreate_progress_artifact(
        0.0, key=None, description=f"{kind} job {job_id} over {count(len(site_ids), 'site')}: queued"
    )
    updates: list[asyncio.Task] = []

    def show(status: JobStatus) -> None:
        description = (f"{kind} job {job_id}: {status.status.value}, {status.processed}/{status.total} sites, "
                       f"{status.failed} failed")
        updates.append(asyncio.create_task(
            aupdate_progress_artifact(artifact_id=artifact, progress=float(status.progress), description=description)
        ))

    outcome = await wait_for_batch_job(client, job_id, kind, site_ids, settings, on_progress=show, log=step_logger())
    await asyncio.gather(*updates)
    ending = f"{kind} job {job_id}: {outcome.job.status}" + (f" ({outcome.job.reason})" if outcome.job.reason else "")
    await aupdate_progress_artifact(artifact_id=artifact, progress=100.0 if outcome.finished else 0.0,
                                    description=ending)
    return outcome
