"""Shared fixtures. The Prefect harness is session-scoped and started only by tests that ask for it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tls import Certificate, self_signed

# A night run in a subprocess without the harness starts a temporary Prefect server: under a full suite's load
# it needs more than Prefect's 20 s.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


@pytest.fixture(autouse=True)
def fleet_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every test has a home of its own (state database, reports, `.env`): none reads or writes the user's."""
    home = tmp_path / "fleet-home"
    monkeypatch.setenv("FLEET_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    """A self-signed certificate for 127.0.0.1, used as its own CA by a client told to trust it."""
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test server for the whole session (about 9 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from tests.reference import REPLAY_COUNTS

    if REPLAY_COUNTS:
        terminalreporter.section("replays of the real dashboard's exchanges")
        for line in REPLAY_COUNTS:
            terminalreporter.write_line(line)
