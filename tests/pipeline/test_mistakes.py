"""Mistakes are caught before anything runs: a selection that matches nothing, policy recipients naming an
unknown client, a URL with a password in it. Over real HTTP against the emulator."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Selection
from fleet.rules.plan import NoSiteMatches
from fleet.rules.policy import PolicyError
from flows.nightly import nightly_maintenance


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(("option", "value", "words"), [
    ("--sites", "9999", "no site matches '9999'"),
    ("--tags", "nosuchtag", "no site matches tag 'nosuchtag'"),
    ("--clients", "Nobody Ltd", "no site matches client 'Nobody Ltd'"),
])
def test_a_selection_that_matches_nothing_exits_2_before_any_write(dashboard, tmp_path: Path, option, value, words):
    emulator = dashboard(sites=10, seed=6)
    before = emulator.writes()
    result = CliRunner().invoke(app, ["nightly", "--sites", "1", option, value, "--report-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert emulator.writes() == before
    assert not list(tmp_path.rglob("summary.json"))


@pytest.mark.usefixtures("prefect_harness")
async def test_the_flow_fails_at_once_on_a_selection_that_matches_nothing(dashboard):
    emulator = dashboard(sites=10, seed=6)
    before = emulator.writes()
    state = await nightly_maintenance(selection=Selection(sites=["9999"]), return_state=True)
    assert state.is_failed() and "no site matches '9999'" in state.message
    assert isinstance(await state.result(raise_on_failure=False), NoSiteMatches)
    assert emulator.writes() == before


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(("policy_text", "message"), [
    ("recipients:\n  Acme Typo Inc: [boss@acme.example]\n",
     "recipients: the dashboard has no client named 'Acme Typo Inc'"),
    ("reply_to:\n  Acme Typo Inc: care@agency.example\n",
     "reply_to: the dashboard has no client named 'Acme Typo Inc'"),
])
async def test_a_policy_naming_an_unknown_client_is_an_error_naming_it(dashboard, tmp_path: Path, policy_text, message):
    emulator = dashboard(sites=10, seed=6)
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text)
    before = emulator.writes()
    state = await nightly_maintenance(selection=Selection(), policy_file=str(policy), return_state=True)
    error = await state.result(raise_on_failure=False)
    assert isinstance(error, PolicyError)
    assert str(error) == f"{policy}: {message}"
    assert emulator.writes() == before


@pytest.mark.usefixtures("prefect_harness")
def test_a_night_that_would_send_over_smtp_without_a_sender_stops_before_any_request(dashboard, tmp_path: Path,
                                                                                    monkeypatch):
    emulator = dashboard(sites=10, seed=6)
    monkeypatch.setenv("FLEET_SMTP_HOST", "smtp.agency.example")
    monkeypatch.delenv("FLEET_MAIL_FROM", raising=False)
    before = sum(emulator.truth()["request_counts"].values())
    result = CliRunner().invoke(app, ["nightly", "--report-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "FLEET_MAIL_FROM (not set: not in the environment" in result.output
    assert "): mail sent over SMTP (FLEET_SMTP_HOST) needs a sender" in " ".join(result.output.split())
    assert sum(emulator.truth()["request_counts"].values()) == before  # not even the fleet was listed
    assert not list(tmp_path.rglob("summary.json"))


@pytest.mark.usefixtures("prefect_harness")
def test_fleet_update_exits_2_on_recipients_naming_an_unknown_client(dashboard, tmp_path: Path):
    emulator = dashboard(sites=10, seed=6)
    policy = tmp_path / "policy.yaml"
    policy.write_text("recipients:\n  Acme Typo Inc: [boss@acme.example]\n")
    before = emulator.writes()
    result = CliRunner().invoke(app, ["update", "--policy", str(policy)])
    assert result.exit_code == 2 and "no client named 'Acme Typo Inc'" in result.output
    assert emulator.writes() == before


def test_a_url_with_a_password_is_refused_and_never_echoed(monkeypatch):
    monkeypatch.setenv("FLEET_BASE_URL", "https://admin:hunter2@dash.example.com/wp-json")
    monkeypatch.setenv("FLEET_API_KEY", "secret==key")
    for command in (["dashboard", "sites"], ["nightly"]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        assert "must not carry a user name or password" in result.output
        assert "hunter2" not in result.output and "admin:" not in result.output


UNKNOWN_CLIENT_POLICY = "overrides:\n  clients:\n    Acme Typo Inc: {semver: patch}\n"
BAD_DATE_POLICY = "holds:\n  - item: woocommerce < 9.0\n    reason: breaks the shop\n    expires: 2026-13-45\n"


@pytest.mark.parametrize(("args", "env", "home_env", "code", "words"), [
    (["nightly"], {"FLEET_API_KEY": None}, "FLEET_API_KEY=wrong==key\n", 3,
     "refused the REST API key FLEET_API_KEY in {home}/.env: "),
    (["nightly"], {"FLEET_API_KEY": "my-password"}, "", 2,
     "FLEET_API_KEY (environment): is not a MainWP REST API key: a key reads <secret>==<key>"),
    (["nightly", "--sites", "nosuch"], {}, "", 2, "no site matches 'nosuch'"),
    (["nightly"], {"FLEET_SMTP_SECURITY": None}, "FLEET_SMTP_SECURITY=tls\n", 2,
     "FLEET_SMTP_SECURITY in {home}/.env: Input should be 'ssl', 'starttls' or 'none'"),
    (["nightly", "--policy", "{tmp}/policy.yaml"], {}, "", 2,
     "{tmp}/policy.yaml: holds.0.expires: Input should be a valid date"),
    (["update"], {"FLEET_CONCURRENCY": "0"}, "", 2,
     "FLEET_CONCURRENCY (environment): Input should be greater than or equal to 1"),
    (["nightly"], {"FLEET_BASE_URL": None}, "FLEET_BASE_URL={base}/nope\n", 2,
     "FLEET_BASE_URL in {home}/.env: {base}/nope leads to no MainWP REST API (GET /wp-json/nope/"),
    (["nightly", "--policy", "{tmp}/clients.yaml"], {}, "", 2,
     "{tmp}/clients.yaml: overrides.clients: the dashboard has no client named 'Acme Typo Inc'"),
])
@pytest.mark.long(9)  # each a `fleet` process of its own
def test_a_mistake_costs_one_line_before_any_flow_run_or_prefect_server(
    dashboard, tmp_path: Path, fleet_home: Path, args, env, home_env, code, words
):
    """As an operator runs it, with no Prefect server configured: a process of its own, its whole output read.
    The mistake is found before a temporary Prefect server starts (its home stays empty), before any flow run
    (no Failed run, no alert), and before any write."""
    import os
    import subprocess
    import sys

    emulator = dashboard(sites=6, seed=2)
    fleet_home.mkdir(parents=True, exist_ok=True)
    base = emulator.server.credentials["base_url"]
    (fleet_home / ".env").write_text(home_env.format(base=base))
    (tmp_path / "policy.yaml").write_text(BAD_DATE_POLICY)
    (tmp_path / "clients.yaml").write_text(UNKNOWN_CLIENT_POLICY)
    prefect_home = tmp_path / "prefect-home"
    before = emulator.writes()
    root = Path(__file__).resolve().parents[2]
    environment = {key: value for key, value in {**os.environ, **env}.items()
                   if not key.startswith("PREFECT_") and value is not None}  # None: the home's .env says it
    import pty

    reader, terminal = pty.openpty()  # a person at a terminal: reads the line, is not alerted
    try:
        done = subprocess.run([sys.executable, "-c", "from cli.app import app; app()",
                               *[arg.format(tmp=tmp_path) for arg in args]], cwd=root,
                              env={**environment, "PYTHONPATH": str(root), "PREFECT_HOME": str(prefect_home)},
                              stdin=terminal, capture_output=True, text=True, timeout=180)
    finally:
        os.close(reader)
        os.close(terminal)
    output = done.stdout + done.stderr
    assert done.returncode == code, output
    assert "Traceback" not in output and "wrong==key" not in output and "my-password" not in output
    label = "update run" if args[0] == "update" else "nightly run"
    expected = words.format(home=fleet_home, tmp=tmp_path, base=base)
    assert [line for line in output.strip().splitlines() if not line.startswith("the state database")] == [
        f"{label} not started: " + next(line.split(": ", 1)[1] for line in output.splitlines()
                                          if line.startswith(f"{label} not started: "))], output
    assert expected in output, output
    assert not list(prefect_home.rglob("*.db")), "a temporary Prefect server was started"
    assert not (Path(os.environ["FLEET_REPORT_DIR"]) / "alerts").exists(), "the operator was alerted"
    assert emulator.writes() == before


@pytest.mark.usefixtures("prefect_harness")
async def test_a_bad_mail_setting_stops_a_deployment_run_before_its_first_write(dashboard, monkeypatch):
    """A run started from the UI (the flow itself): the same one line, no write, and no alert for a person's run."""
    emulator = dashboard(sites=6, seed=2)
    monkeypatch.setenv("FLEET_SMTP_SECURITY", "tls")
    before = emulator.writes()
    state = await nightly_maintenance(return_state=True)
    assert state.is_failed()
    assert "FLEET_SMTP_SECURITY (environment): Input should be 'ssl', 'starttls' or 'none'" in state.message
    assert emulator.writes() == before
    assert not (Path(os.environ["FLEET_REPORT_DIR"]) / "alerts").exists()


def test_a_first_run_at_a_terminal_without_a_dotenv_says_where_it_looked_and_no_telemetry_notice(tmp_path: Path):
    """A new user's first command at a terminal (standard output and error a terminal, a fresh Prefect home, no CI):
    the one line says which files it looked in, and Prefect prints no telemetry notice (and records none)."""
    import pty
    import subprocess
    import sys

    from prefect._internal.analytics.ci_detection import CI_ENV_VARS

    root = Path(__file__).resolve().parents[2]
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PREFECT_", "FLEET_", "DO_NOT_TRACK")) and key not in CI_ENV_VARS}
    env |= {"PYTHONPATH": str(root), "PREFECT_HOME": str(tmp_path / "prefect-home"), "FLEET_HOME": str(home)}
    reader, terminal = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-c", "from cli.app import app; app()", "nightly"], cwd=work, env=env,
                              stdin=terminal, stdout=terminal, stderr=terminal, timeout=120)
        os.close(terminal)
        printed = b""
        while True:
            try:
                chunk = os.read(reader, 65536)
            except OSError:  # the terminal's other end is closed: all is read
                break
            if not chunk:
                break
            printed += chunk
    finally:
        os.close(reader)
    import re

    output = re.sub(r"\x1b\[[0-9;]*m", "", printed.decode())  # the red of the line
    assert done.returncode == 2, output
    lines = [line for line in output.replace("\r", "").splitlines() if line.strip()
             and not line.startswith("the state database")]
    assert lines == [f"nightly run not started: FLEET_BASE_URL (not set: not in the environment, nor in "
                     f"{home / '.env'} (no such file) or {work / '.env'} (no such file)): Field required"], output
    assert not (tmp_path / "prefect-home" / ".sdk_telemetry").exists()
