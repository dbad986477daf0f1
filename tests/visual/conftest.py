"""One Chromium and one emulator serving real pages over a socket for the whole session; tests that need the
browser are skipped, saying why, only on a machine without Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.visual.capture import CHROMIUM, PageCapture, chromium_path


@pytest.fixture(scope="session")
def site_server() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(sites=40, seed=7, time_scale=1e-6)) as server:
        yield server


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("visual-run")


@pytest.fixture(scope="session")
async def capture(run_dir: Path) -> AsyncIterator[PageCapture]:
    if chromium_path() is None:
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's `chromium` to run the screenshot tests")
    async with PageCapture(run_dir) as session:
        yield session
