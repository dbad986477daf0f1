"""The nightly schedule creates runs: a real `prefect server start` from the installed set, its scheduler on a short
loop (Prefect's own setting), and `fleet serve` registering the deployments as an operator starts it.

With sqlalchemy 2.1 Prefect 3.8.8's scheduler failed on every loop ("Can't evaluate bulk DML statement"), so no
scheduled run ever appeared while `fleet serve` said it was polling for them: the first test failed on that lock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from cli.demo import dashboard_environment
from cli.local_prefect import LocalPrefectServer, clean_environment, command_path
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer

NIGHTLY = ("nightly-maintenance", "nightly")
BERLIN = ZoneInfo("Europe/Berlin")
SHORT_LOOP = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2"}

pytestmark = pytest.mark.long(20)  # real Prefect servers and `fleet serve` processes


def scheduled_runs(server: LocalPrefectServer) -> list[dict]:
    flow, deployment = NIGHTLY
    body = {"flows": {"name": {"any_": [flow]}}, "deployments": {"name": {"any_": [deployment]}},
            "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}, "sort": "EXPECTED_START_TIME_ASC"}
    answer = httpx.post(f"{server.api_url}/flow_runs/filter", json=body, timeout=30)
    answer.raise_for_status()
    return answer.json()


@pytest.fixture(scope="module")
def dashboard_settings() -> Iterator[dict[str, str]]:
    """The FLEET_* variables of an emulated dashboard: `fleet serve` checks the night's settings and key first."""
    with EmulatorServer(EmulatorConfig(sites=3, time_scale=0.001)) as emulator:
        yield dashboard_environment(emulator.credentials)


@contextmanager
def fleet_serve(server: LocalPrefectServer, directory: Path, dashboard: dict[str, str],
                **settings: str) -> Iterator[Callable[[], str]]:
    """`fleet serve` against the server, started in `directory`; yields a reader of what it printed so far."""
    output = directory / f"serve-{time.monotonic_ns()}.log"
    env = server.environment(COLUMNS="200", **dashboard, **settings)
    with output.open("wb") as log:
        serving = subprocess.Popen([command_path("fleet"), "serve"], env=env, cwd=directory, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield lambda: output.read_text(errors="replace")
    finally:
        if serving.poll() is None:
            os.killpg(serving.pid, signal.SIGINT)  # as Ctrl-C or systemd's stop would
            try:
                serving.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(serving.pid, signal.SIGKILL)


def wait_for(condition: Callable[[], object], timeout: float = 90) -> object:
    deadline = time.monotonic() + timeout
    while not (found := condition()) and time.monotonic() < deadline:
        time.sleep(1)
    return found


def test_the_nightly_schedule_creates_runs_on_the_installed_prefect(
    tmp_path: Path, dashboard_settings: dict[str, str]
) -> None:
    settings = {"FLEET_SCHEDULE_CRON": "30 3 * * *", "FLEET_SCHEDULE_TIMEZONE": "Europe/Berlin",
                "FLEET_SCHEDULE_CHECK_SECONDS": "60"}
    with LocalPrefectServer(tmp_path / "prefect", SHORT_LOOP) as server:
        for start in ("first start", "restart"):  # a service restarted (systemd, a reboot) schedules again
            with fleet_serve(server, tmp_path, dashboard_settings, **settings) as printed:
                runs = wait_for(lambda: scheduled_runs(server))
                assert runs, f"{start}: no scheduled run of the nightly deployment in 90 s:\n{printed()[-3000:]}\n" \
                    + server.log.read_text(errors="replace")[-3000:]
                starts = [datetime.fromisoformat(run["expected_start_time"]) for run in runs]
                assert all(start > datetime.now(UTC) for start in starts)
                assert {start.astimezone(BERLIN).strftime("%H:%M") for start in starts} == {"03:30"}
                # fleet serve says when the night runs next, as the server scheduled it
                assert wait_for(lambda: "nightly-maintenance/nightly: next runs" in printed()), printed()[-3000:]
                assert f"{starts[0].astimezone(BERLIN):%Y-%m-%d} 03:30" in printed(), printed()[-3000:]
                assert "WARNING" not in printed()
                # the README's way to see the upcoming runs (while serving: stopping pauses the schedule)
                listed = subprocess.run([command_path("prefect"), "flow-run", "ls", "--flow-name",
                                         "nightly-maintenance", "--state", "Scheduled"],
                                        env=server.environment(COLUMNS="200"), capture_output=True, text=True,
                                        timeout=120)
                assert listed.returncode == 0 and "SCHEDULED" in listed.stdout, listed.stdout + listed.stderr
        assert "Traceback" not in server.log.read_text(errors="replace")


def test_fleet_serve_warns_when_the_server_schedules_nothing(
    tmp_path: Path, dashboard_settings: dict[str, str]
) -> None:
    off = {"PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false"}
    with LocalPrefectServer(tmp_path / "prefect", off) as server, \
            fleet_serve(server, tmp_path, dashboard_settings, FLEET_SCHEDULE_CHECK_SECONDS="4") as printed:
        assert wait_for(lambda: "WARNING" in printed()), printed()[-3000:]
        warning = next(line for line in printed().splitlines() if "WARNING" in line)
        assert "no run of nightly-maintenance/nightly" in warning
        assert "nothing will run" in warning and "scheduler" in warning
        assert not scheduled_runs(server)


def test_fleet_serve_does_not_start_a_service_that_would_fail_every_night(tmp_path: Path) -> None:
    """No dashboard configured: one line naming the variable, exit 2, before anything registers."""
    env = clean_environment(tmp_path / "prefect", FLEET_HOME=str(tmp_path / "home"),
                            PREFECT_API_URL="http://127.0.0.1:9/api")
    env = {key: value for key, value in env.items() if not key.startswith("FLEET_") or key == "FLEET_HOME"}
    done = subprocess.run([command_path("fleet"), "serve"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == "fleet serve not started: FLEET_BASE_URL (not set): Field required"
