"""Emulators over a real loopback socket, one per namespace, and clients built from their credentials."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from dashboard import DashboardClient
from tests.dashboard.emulated import FAST_RETRIES, NAMESPACES, GroundTruth


def start_server(**config: Any) -> Any:
    from emulator.config import EmulatorConfig
    from emulator.testing import EmulatorServer

    return EmulatorServer(EmulatorConfig(**config))


@pytest.fixture(scope="session", params=NAMESPACES)
def emulator(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A 30-site emulator at a small time scale, for each namespace."""
    with start_server(namespace=request.param, sites=30, seed=11, time_scale=0.001) as server:
        yield server


@pytest.fixture
def truth(emulator: Any) -> GroundTruth:
    return GroundTruth(emulator)


@pytest.fixture
async def client(emulator: Any) -> AsyncIterator[DashboardClient]:
    async with DashboardClient.from_credentials(emulator.credentials, **FAST_RETRIES) as dashboard:
        yield dashboard
