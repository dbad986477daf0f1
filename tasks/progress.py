"""Where progress goes: the run's log (or a plain logger outside a run) and the night's progress artifact."""

from __future__ import annotations

import asyncio
import logging
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import acreate_progress_artifact, aupdate_progress_artifact
from prefect.exceptions import MissingContextError

from fleet.progress import NightProgress


def step_logger() -> logging.Logger | logging.LoggerAdapter:
    """The Prefect run logger inside a flow or task run, else the `fleet` logger (plain function calls)."""
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("fleet")


class NightArtifact:
    """One Prefect progress artifact for the night: sites synced, items applied, sites checked.

    Updates are sent one at a time; a move that comes while one is being sent is folded into the next.
    """

    def __init__(self, progress: NightProgress) -> None:
        self.progress = progress
        self._id: UUID | None = None
        self._sending: asyncio.Task | None = None
        self._dirty = False

    async def open(self) -> None:
        self._id = await acreate_progress_artifact(0.0, key="night-progress", description=self.progress.describe())
        self.progress.changed = lambda _: self.touch()

    def touch(self) -> None:
        self._dirty = True
        if self._id is not None and (self._sending is None or self._sending.done()):
            self._sending = asyncio.create_task(self._send())

    async def _send(self) -> None:
        while self._dirty:
            self._dirty = False
            await aupdate_progress_artifact(artifact_id=self._id, progress=self.progress.percent(),
                                            description=self.progress.describe())

    async def close(self) -> None:
        self.progress.changed = None
        if self._sending is not None:
            await self._sending
        if self._id is not None:
            self._dirty = True
            await self._send()
