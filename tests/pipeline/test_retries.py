"""Coarse step retries: never for errors that cannot heal (auth, permission, invalid input, bad policy)."""

from __future__ import annotations

import pytest
from prefect import flow, task
from prefect.states import Failed

from dashboard.errors import (
    ActionFailed,
    AuthenticationError,
    InvalidInput,
    PermissionDenied,
    ServerError,
    SiteOffline,
    TransportError,
)
from fleet.rules.policy import PolicyError
from orchestration.retries import STEP_OPTIONS, retry_unless_permanent


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (AuthenticationError("The REST API Key are disabled.", status=401), False),
        (PermissionDenied("no write permission", status=401), False),
        (InvalidInput("input is not of type object", status=400), False),
        (PolicyError("policy.yaml: semver: bad"), False),
        (SiteOffline("callback threw an exception: NOMAINWP", status=500), False),  # the dashboard's definite answer
        (ActionFailed("Plugins slugs are empty", status=200), False),
        (TransportError("connection refused"), True),
        (ServerError("502 Bad Gateway", status=502), True),
        (RuntimeError("unexpected"), True),
    ],
)
def test_retry_condition(error, retried):
    assert retry_unless_permanent(None, None, Failed(data=error)) is retried


async def test_an_async_step_is_not_retried_on_a_permanent_error(prefect_harness):
    attempts = []

    @task(**STEP_OPTIONS)
    async def step() -> None:
        attempts.append(1)
        raise InvalidInput("input is not of type object", status=400)

    @flow
    async def night() -> None:
        await step()

    with pytest.raises(InvalidInput):
        await night()
    assert len(attempts) == 1
