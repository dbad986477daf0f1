"""The nightly schedule creates runs: a real `prefect server start` from the installed set, its scheduler on a short
loop (Prefect's own setting), and `fleet serve` registering the deployments as an operator starts it.

With sqlalchemy 2.1 Prefect 3.8.8's scheduler failed on every loop ("Can't evaluate bulk DML statement"), so no
scheduled run ever appeared while `fleet serve` said it was polling for them: the first test failed on that lock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from cli.demo import dashboard_environment
from cli.local_prefect import LocalPrefectServer, clean_environment, command_path
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from tests.local_http import LOCAL_HTTP

NIGHTLY = ("nightly-maintenance", "nightly")
BERLIN = ZoneInfo("Europe/Berlin")
SHORT_LOOP = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2"}

pytestmark = pytest.mark.long(20)  # real Prefect servers and `fleet serve` processes


def scheduled_runs(server: LocalPrefectServer) -> list[dict]:
    flow, deployment = NIGHTLY
    body = {"flows": {"name": {"any_": [flow]}}, "deployments": {"name": {"any_": [deployment]}},
            "flow_runs": {"state": {"type": {"any_": ["SCHEDULED"]}}}, "sort": "EXPECTED_START_TIME_ASC"}
    answer = LOCAL_HTTP.post(f"{server.api_url}/flow_runs/filter", json=body)
    answer.raise_for_status()
    return answer.json()


@pytest.fixture(scope="module")
def dashboard_settings() -> Iterator[dict[str, str]]:
    """The FLEET_* variables of an emulated dashboard: `fleet serve` checks the night's settings and key first."""
    with EmulatorServer(EmulatorConfig(sites=3, time_scale=0.001)) as emulator:
        yield dashboard_environment(emulator.credentials)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPrefectServer]:
    with LocalPrefectServer(tmp_path_factory.mktemp("prefect"), SHORT_LOOP) as server:
        yield server


@pytest.fixture
def server(module_server: LocalPrefectServer) -> LocalPrefectServer:
    """The module's `prefect server start` (its scheduler on a short loop), with no deployment left by a test before
    (deleting one deletes its scheduled runs): one server for the module's serving tests instead of one each, about
    10 CPU-s less per test on 2 cores. The test that needs the scheduler off starts its own."""
    found = LOCAL_HTTP.post(f"{module_server.api_url}/deployments/filter", json={})
    found.raise_for_status()
    for deployment in found.json():
        # Prefect answers 503 while its SQLite database is locked (its scheduler writing runs): asked again
        for _ in range(60):
            answer = LOCAL_HTTP.delete(f"{module_server.api_url}/deployments/{deployment['id']}")
            if answer.status_code != 503:
                break
            time.sleep(1)
        assert answer.status_code in (204, 404), (answer.status_code, answer.text)
    return module_server


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
    tmp_path: Path, dashboard_settings: dict[str, str], server: LocalPrefectServer
) -> None:
    settings = {"FLEET_SCHEDULE_CRON": "30 3 * * *", "FLEET_SCHEDULE_TIMEZONE": "Europe/Berlin",
                "FLEET_SCHEDULE_CHECK_SECONDS": "60"}
    logged = len(server.log.read_bytes())  # the server's log of this test
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
    assert "Traceback" not in server.log.read_bytes()[logged:].decode(errors="replace")


def test_fleet_serve_warns_when_the_server_schedules_nothing(
    tmp_path: Path, dashboard_settings: dict[str, str]
) -> None:
    off = {"PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false"}
    with LocalPrefectServer(tmp_path / "prefect", off) as server, \
            fleet_serve(server, tmp_path, dashboard_settings, FLEET_SCHEDULE_CHECK_SECONDS="4") as printed:
        # both scheduled deployments (the night, the security runs) warn, in the order their checks come round
        assert wait_for(lambda: "no run of nightly-maintenance/nightly" in printed()), printed()[-3000:]
        warning = next(line for line in printed().splitlines() if "no run of nightly-maintenance/nightly" in line)
        assert warning.startswith("WARNING")
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
    said = done.stderr.strip()
    assert said.startswith("fleet serve not started: FLEET_BASE_URL (not set: not in the environment, nor in ") \
        and said.endswith("(no such file)): Field required") and "\n" not in said, said


def test_fleet_serve_does_not_start_with_a_policy_naming_a_client_the_dashboard_does_not_have(
    tmp_path: Path, dashboard_settings: dict[str, str]
) -> None:
    """Every scheduled night would fail on it: one line naming the policy file and the client, exit 2, before any
    deployment registers (no Prefect server is needed to find it)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("recipients:\n  Acme Typo Inc: [boss@acme.example]\n")
    env = clean_environment(tmp_path / "prefect", FLEET_HOME=str(tmp_path / "home"),
                            PREFECT_API_URL="http://127.0.0.1:9/api", FLEET_POLICY_FILE=str(policy),
                            **dashboard_settings)
    done = subprocess.run([command_path("fleet"), "serve"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("the state database")]
    assert lines == [f"fleet serve not started: {policy}: recipients: the dashboard has no client named "
                     "'Acme Typo Inc'"], done.stdout + done.stderr


def test_a_failed_night_is_one_line_in_fleet_serves_output_and_its_traceback_stays_in_the_runs_logs(
    tmp_path: Path, dashboard_settings: dict[str, str], server: LocalPrefectServer
) -> None:
    """The dashboard stops answering after `fleet serve` started; the night run then fails. `fleet serve`'s output
    says it in one line (what failed, the run id, where its report is), with no traceback; the flow run's own logs
    in Prefect keep the traceback."""
    from bench.serve_stops import SERVE_SETTINGS, state_of, trigger
    from emulator.testing import free_port

    closed = {**dashboard_settings, "FLEET_BASE_URL": f"http://127.0.0.1:{free_port()}/wp-json",
              "FLEET_MAX_ATTEMPTS": "1", "FLEET_REPORT_DIR": str(tmp_path / "reports")}
    with fleet_serve(server, tmp_path, closed, **SERVE_SETTINGS) as printed:
        assert wait_for(lambda: "serving report/report" in printed()), printed()[-3000:]
        run_id = trigger(server, "nightly-maintenance/nightly")
        assert wait_for(lambda: state_of(server, run_id) in ("FAILED", "CRASHED")), printed()[-3000:]
        assert wait_for(lambda: f"({run_id}) failed" in printed()), printed()[-3000:]

        def logs() -> list[dict]:  # the run's process ships its log records in batches: the last may come later
            return LOCAL_HTTP.post(f"{server.api_url}/logs/filter",
                                   json={"logs": {"flow_run_id": {"any_": [run_id]}}}).json()

        traced = wait_for(lambda: any("Traceback" in entry["message"] for entry in logs()), timeout=60)
        messages = [entry["message"] for entry in logs()]
    output = printed()
    assert "Traceback" not in output, output[-3000:]
    [line] = [line for line in output.splitlines() if f"({run_id}) failed" in line]
    assert "failed: TransportError: GET /wp-json/mainwp/v2/clients: ConnectError" in line, line
    assert "no report was written; the traceback is in the flow run's logs" in line, line
    assert traced, messages[-5:]


def test_a_vulnerability_published_between_nights_is_patched_by_fleet_serves_security_deployment(
    tmp_path: Path, server: LocalPrefectServer
) -> None:
    """The night is far off (cron once a year); the security deployment looks every 30 s: a fix published in the
    feed is installed on the site offered it, by a flow run of `security-patch/security` that `fleet serve` ran,
    and nothing but fixes is applied (the routine updates wait: `min_age_days`)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("min_age_days: 30\n")
    with EmulatorServer(EmulatorConfig(sites=3, seed=7, time_scale=0.001)) as emulator:
        credentials, token = emulator.credentials, {"X-Emulator-Token": emulator.credentials["admin_token"]}

        def truth() -> dict:
            return LOCAL_HTTP.get(f"{emulator.root_url}/__emulator__/state", headers=token).json()

        site = next(site for site in truth()["sites"].values() if site["status"] == "connected"
                    and sum(u["type"] == "plugin" for u in site["pending_updates"]) >= 2)
        target = next(u for u in site["pending_updates"] if u["type"] == "plugin")
        LOCAL_HTTP.post(f"{emulator.root_url}/__emulator__/vulnerabilities/publish", headers=token, json={
            "type": "plugin", "slug": target["slug"], "to_version": target["current_version"],
            "patched": [target["new_version"]]}).raise_for_status()
        settings = {"FLEET_SCHEDULE_CRON": "0 3 1 1 *", "FLEET_SECURITY_INTERVAL_SECONDS": "30",
                    "FLEET_VULN_FEED": credentials["vulnerability_feed"], "FLEET_VULN_FEED_KEY": token[
                        "X-Emulator-Token"], "FLEET_POLICY_FILE": str(policy), "FLEET_REPORT_DIR": str(tmp_path / "r"),
                    "FLEET_STATE_DB": str(tmp_path / "state.sqlite"), "FLEET_SMTP_HOST": ""}
        with fleet_serve(server, tmp_path, dashboard_environment(credentials), **settings) as printed:
            assert wait_for(lambda: "security-patch/security: next runs" in printed()), printed()[-3000:]

            def patched() -> list[dict]:
                items = [item for path in (tmp_path / "r").glob("*/summary.json")
                         for item in json.loads(path.read_text())["items"]]
                return items if any(item["slug"] == target["slug"] and item["outcome"] == "updated"
                                    for item in items) else []

            items = wait_for(patched, timeout=240)
            assert items, printed()[-3000:]
        assert truth()["sites"][str(site["id"])]["plugins"][target["slug"]]["version"] == target["new_version"]
        assert {item["security"]["security"] for item in items} == {"fixes"}
        left = {(u["type"], u["slug"]) for u in truth()["sites"][str(site["id"])]["pending_updates"]}
        assert left, "the routine updates wait for the night"
