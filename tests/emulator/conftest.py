"""Fixtures: a small in-process `svc` emulator and clients carrying each credential."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from emulator.config import EmulatorConfig
from emulator.testing import InProcessEmulator


@pytest.fixture
def lab() -> Iterator[InProcessEmulator]:
    emulator = InProcessEmulator(EmulatorConfig(namespace="svc", sites=30, seed=3, time_scale=1e-6))
    yield emulator
    emulator.close()


@pytest.fixture
async def rw(lab: InProcessEmulator) -> AsyncIterator[httpx.AsyncClient]:
    async with lab.client(headers={"Authorization": "Bearer " + lab.credentials["api_keys"]["read_write"]}) as c:
        yield c


@pytest.fixture
async def admin(lab: InProcessEmulator) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=lab.transport, base_url=lab.root_url, headers={"X-Emulator-Token": lab.credentials["admin_token"]}
    ) as c:
        yield c
