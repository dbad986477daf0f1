"""Background task runs submitted from inside a run (the night's page shots on task workers)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TypeVar

from prefect.context import FlowRunContext, TaskRunContext

R = TypeVar("R")


def detached(submit: Callable[..., R], *args: object) -> R:
    """Submit a background task run outside the calling flow's and task's run contexts: Prefect stores the
    context with a run's parameters, and the calling task's (the night's client, its open browser) cannot be
    stored. The batches show in the UI as task runs of their own, named `shoot-pages`."""

    def outside() -> R:
        TaskRunContext.__var__.set(None)
        FlowRunContext.__var__.set(None)
        return submit(*args)

    return contextvars.copy_context().run(outside)
