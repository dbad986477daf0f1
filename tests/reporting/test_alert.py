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


def fleet(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The `fleet` command in a process of its own, as an operator runs it."""
    return subprocess.run([sys.executable, "-c", "from cli.app import app; app()", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True,
                          timeout=180)


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
