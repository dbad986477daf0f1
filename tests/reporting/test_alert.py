"""A night that fails reaches someone: the alert goes to a real SMTP server and through a real Prefect
notification block to a real local webhook receiver, and the command prints one line, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.local_http import LOCAL_HTTP
from tests.reporting.conftest import SmtpServer, free_port

ROOT = Path(__file__).resolve().parents[2]


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Hook)
        self.received: list[tuple[str, dict]] = []


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["content-length"]))
        self.server.received.append((self.path, json.loads(body)))  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def fleet(args: list[str], env: dict[str, str], cwd: Path, *, terminal: bool = True, inherit: bool = True
          ) -> subprocess.CompletedProcess[str]:
    """The `fleet` command in a process of its own, as an operator runs it: at a terminal (its standard input a
    pseudo-terminal), or as cron and systemd start it (standard input not a terminal); `inherit=False`: with
    `env` alone."""
    import pty

    reader, writer = pty.openpty() if terminal else (None, None)
    try:
        return subprocess.run([sys.executable, "-c", "from cli.app import app; app()", *args], cwd=cwd,
                              env={**(os.environ if inherit else {}), "PYTHONPATH": str(ROOT), **env},
                              capture_output=True, text=True, stdin=writer if terminal else subprocess.DEVNULL,
                              timeout=180)
    finally:
        for end in (reader, writer):
            if end is not None:
                os.close(end)


@pytest.mark.long(25)
@pytest.mark.usefixtures("prefect_harness")
def test_an_unreachable_dashboard_alerts_by_smtp_and_webhook_with_one_line_and_exit_4(
    smtp_server: SmtpServer, webhook: Receiver, tmp_path: Path
):
    """At the terminal the command says it in one line, before any flow run (nobody needs paging: the operator is
    reading it); the night itself, as the schedule starts it, fails and alerts on every channel."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL

    CustomWebhookNotificationBlock(
        name="pager", url=f"http://127.0.0.1:{webhook.server_port}/alert",
        json_data={"title": "{{subject}}", "text": "{{body}}"},
    ).save("pager", overwrite=True)
    closed = free_port()
    env = {
        "PREFECT_API_URL": PREFECT_API_URL.value(),
        "FLEET_BASE_URL": f"http://127.0.0.1:{closed}/wp-json", "FLEET_API_KEY": "secret==key",
        "FLEET_NAMESPACE": "svc", "FLEET_MAX_ATTEMPTS": "2", "FLEET_RETRY_INITIAL": "0.01",
        "FLEET_SMTP_HOST": smtp_server.host, "FLEET_SMTP_PORT": str(smtp_server.port), "FLEET_SMTP_SECURITY": "none",
        "FLEET_SMTP_ATTEMPTS": "1", "FLEET_REPORT_TO": "ops@example.com", "FLEET_MAIL_FROM": "fleet@example.com",
        "FLEET_ALERT_BLOCKS": "custom-webhook/pager", "FLEET_REPORT_DIR": str(tmp_path / "reports"),
    }

    done = fleet(["nightly"], env, tmp_path)

    output = done.stdout + done.stderr
    assert done.returncode == 4, output
    assert "Traceback" not in output
    [line] = [line for line in output.splitlines() if line.startswith("nightly run not started")]
    assert f"cannot reach the dashboard at 127.0.0.1:{closed}" in line and "ConnectError" in line
    assert "secret==key" not in output
    assert not smtp_server.mailbox.received and not webhook.received

    night = subprocess.run([sys.executable, "-c", "import asyncio; from flows.nightly import nightly_maintenance; "
                            "asyncio.run(nightly_maintenance(return_state=True))"], cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True,
                           timeout=180)
    assert "Finished in state Failed" in night.stdout + night.stderr, night.stdout + night.stderr

    [mail] = smtp_server.mailbox.received
    assert mail.rcpt_tos == ["ops@example.com"]
    assert "nightly-maintenance" in mail.message["Subject"] and "failed" in mail.message["Subject"]
    text = mail.message.get_body(("plain",)).get_content()
    assert f"Dashboard: 127.0.0.1:{closed}" in text and "Run id: " in text and "ConnectError" in text
    [(path, posted)] = webhook.received
    assert path == "/alert" and posted["title"] == mail.message["Subject"]
    assert f"127.0.0.1:{closed}" in posted["text"] and "ConnectError" in posted["text"]
    assert "secret==key" not in json.dumps(posted) + text


@pytest.mark.usefixtures("prefect_harness")
async def test_a_key_revoked_after_the_service_started_alerts_naming_the_variable_and_its_file(
    fleet_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The key passed `fleet serve`'s check, then someone revoked it on the dashboard: the next night fails and its
    alert says which setting to fix and in which file, not only "HTTP 401"."""

    from emulator.config import EmulatorConfig
    from emulator.testing import EmulatorServer
    from flows.nightly import nightly_maintenance

    with EmulatorServer(EmulatorConfig(sites=3, time_scale=0.001)) as emulator:
        credentials = emulator.credentials
        key = credentials["api_keys"]["read_write"]
        fleet_home.mkdir(parents=True, exist_ok=True)
        (fleet_home / ".env").write_text(f"FLEET_BASE_URL={credentials['base_url']}\n"
                                         f"FLEET_NAMESPACE={credentials['namespace']}\nFLEET_API_KEY={key}\n")
        for variable in ("FLEET_BASE_URL", "FLEET_NAMESPACE", "FLEET_API_KEY", "FLEET_ABILITIES_USER",
                         "FLEET_ABILITIES_PASSWORD", "FLEET_SMTP_HOST", "FLEET_ALERT_BLOCKS"):
            monkeypatch.delenv(variable, raising=False)
        monkeypatch.setenv("FLEET_REPORT_DIR", str(tmp_path / "reports"))
        revoked = LOCAL_HTTP.delete(f"{credentials['base_url']}/{credentials['namespace']}/v2/rest-api/delete-key/"
                                    f"ck_{key.split('==')[1]}", headers={"Authorization": f"Bearer {key}"})
        assert revoked.status_code == 200, revoked.text

        state = await nightly_maintenance(return_state=True)

    assert state.is_failed()
    from email import message_from_bytes, policy

    [alert] = (tmp_path / "reports" / "alerts").glob("*.eml")
    text = message_from_bytes(alert.read_bytes(), policy=policy.default).get_body(("plain",)).get_content()
    assert f"the dashboard refused the REST API key FLEET_API_KEY in {fleet_home}/.env" in text, text
    assert key not in text and key.split("==")[0] not in text


@pytest.mark.usefixtures("prefect_harness")
def test_fleet_nightly_that_cannot_start_alerts_when_no_terminal_reads_it(
    smtp_server: SmtpServer, webhook: Receiver, tmp_path: Path
):
    """Started by cron or systemd (standard input not a terminal), the unreachable dashboard's one line reaches the
    operator by e-mail and through the notification block, as a scheduled night's failure does; the same command
    at a terminal alerts nobody (the test above)."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL

    CustomWebhookNotificationBlock(
        name="cron-pager", url=f"http://127.0.0.1:{webhook.server_port}/alert",
        json_data={"title": "{{subject}}", "text": "{{body}}"},
    ).save("cron-pager", overwrite=True)
    closed = free_port()
    env = {
        "PREFECT_API_URL": PREFECT_API_URL.value(),
        "FLEET_BASE_URL": f"http://127.0.0.1:{closed}/wp-json", "FLEET_API_KEY": "secret==key",
        "FLEET_MAX_ATTEMPTS": "2", "FLEET_RETRY_INITIAL": "0.01",
        "FLEET_SMTP_HOST": smtp_server.host, "FLEET_SMTP_PORT": str(smtp_server.port), "FLEET_SMTP_SECURITY": "none",
        "FLEET_SMTP_ATTEMPTS": "1", "FLEET_REPORT_TO": "ops@example.com", "FLEET_MAIL_FROM": "fleet@example.com",
        "FLEET_ALERT_BLOCKS": "custom-webhook/cron-pager", "FLEET_REPORT_DIR": str(tmp_path / "reports"),
    }

    done = fleet(["nightly"], env, tmp_path, terminal=False)

    output = done.stdout + done.stderr
    assert done.returncode == 4, output
    assert "Traceback" not in output and "secret==key" not in output
    [line] = [line for line in output.splitlines() if line.startswith("nightly run not started")]
    assert "fleet nightly: operator alerted (no terminal)" in output, output
    [mail] = smtp_server.mailbox.received
    assert mail.rcpt_tos == ["ops@example.com"]
    assert mail.message["Subject"] == (f"fleet-maintenance: fleet nightly could not start the nightly-maintenance run "
                                       f"(dashboard 127.0.0.1:{closed})")
    text = mail.message.get_body(("plain",)).get_content()
    assert line in text and "nothing was done tonight" in text
    [(path, posted)] = webhook.received
    assert path == "/alert" and posted["title"] == mail.message["Subject"] and line in posted["text"]
    assert "secret==key" not in json.dumps(posted) + text
