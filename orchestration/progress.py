"""Where progress goes: the run's log (or a plain logger outside a run) and the night's progress artifact."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import acreate_progress_artifact, aupdate_progress_artifact
from prefect.exceptions import MissingContextError

from fleet.pacing.progress import NightProgress


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
