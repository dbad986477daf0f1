"""A plain step made a task's body with what only its run can give it (the call gate, the outbox, the run's logger,
the server's way to mark a flow run crashed), made when the task runs: the engine imports no Prefect, and each task
keeps the step's own name-by-name signature without restating it."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

Step = Callable[..., Awaitable[Any]]


def with_run_handles(work: Step, **handles: Callable[[], object]) -> Step:
    """`work` called with each of `handles` made now, as its keyword argument of that name. The signature Prefect
    reads (and the task's callers see) is the work's without those parameters."""
    signature = inspect.signature(work)
    unknown = set(handles) - set(signature.parameters)
    if unknown:
        raise TypeError(f"{work.__qualname__} takes no {', '.join(sorted(unknown))}")

    @functools.wraps(work)
    async def in_the_run(*args: Any, **kwargs: Any) -> Any:
        return await work(*args, **kwargs, **{name: make() for name, make in handles.items()})

    in_the_run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[parameter for parameter in signature.parameters.values() if parameter.name not in handles])
    return in_the_run
