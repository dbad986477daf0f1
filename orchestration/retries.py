"""The coarse retry rule shared by every step: retry what may heal, never what cannot."""

from __future__ import annotations

from typing import Any

from prefect.cache_policies import NO_CACHE
from pydantic import ValidationError

from dashboard.errors import (
    ActionFailed,
    AuthenticationError,
    ConfigurationError,
    InvalidInput,
    PermissionDenied,
    SiteOffline,
)
from fleet.rules.policy import PolicyError

# Errors a second try cannot change: refused credentials or input, and the dashboard's definite answers (it did
# the call and said no, or found the child site not answering): a step is not sent again for them.
PERMANENT_ERRORS = (AuthenticationError, PermissionDenied, InvalidInput, ConfigurationError, PolicyError,
                    ValidationError, ActionFailed, SiteOffline)
# Errors that stop the whole run: nothing else the run could do would be allowed either.
FATAL_ERRORS = (AuthenticationError, PermissionDenied, ConfigurationError)
STEP_RETRIES = 2
STEP_RETRY_DELAYS = [5, 30]


def retry_unless_permanent(task: Any, task_run: Any, state: Any) -> bool:
    """`retry_condition_fn` for Prefect tasks: no retry on auth, permission or invalid-input errors, nor on the
    dashboard's definite answers.

    Prefect hands over `Failed(data=<the exception>)`; `state.result()` would be a coroutine (never awaited,
    so never a permanent error) inside an async task, which every step of the flows is.
    """
    return not isinstance(state.data, PERMANENT_ERRORS)


STEP_OPTIONS: dict[str, Any] = {
    "retries": STEP_RETRIES,
    "retry_delay_seconds": STEP_RETRY_DELAYS,
    "retry_condition_fn": retry_unless_permanent,
    "cache_policy": NO_CACHE,  # inputs hold a live client and large lists: never hash them
    "persist_result": False,
    "cache_result_in_memory": False,  # the flow holds what it needs; Prefect's states need not keep a copy
}
