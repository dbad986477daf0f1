"""Report fixtures: a few nights of realistic summaries, and a real SMTP server on a loopback port."""

from __future__ import annotations

import dataclasses
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from reporting.run_report import RenderedReport, RenderedRun, render_reports
from tests.reporting.builder import write_nights
from tests.tls import Certificate

SMTP_USER, SMTP_PASSWORD = "reports@agency.example", "s3cr3t-Pa55-do-not-leak"


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_nights(tmp_path_factory.mktemp("runs"), nights=5)


@pytest.fixture(scope="module")
def rendered(nights: list[Path]) -> RenderedRun:
    """The last night rendered once per module (rendering draws charts: the slow part)."""
    return render_reports(nights[-1])


@pytest.fixture
def run_copy(rendered: RenderedRun, tmp_path: Path) -> RenderedRun:
    """The nights in a private directory, so deliveries recorded into summary.json do not leak between tests."""
    shutil.copytree(rendered.run_dir.parent, tmp_path / "runs")
    return dataclasses.replace(rendered, run_dir=tmp_path / "runs" / rendered.run_dir.name)


def body(rendered: RenderedRun, report: RenderedReport, suffix: str) -> str:
    """One written format of a report (`.html`, `.txt`, `.md`)."""
    return rendered.path(report, suffix).read_text(encoding="utf-8")


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage


@dataclass
class Mailbox:
    """aiosmtpd handler: keeps what it accepts; refuses or defers the recipients it is told to."""

    received: list[Received] = field(default_factory=list)
    refuse: dict[str, str] = field(default_factory=dict)
    defer: dict[str, int] = field(default_factory=dict)  # recipient -> how many 451 answers before accepting
    logins: list[tuple[str, str]] = field(default_factory=list)
    greetings: int = 0  # one EHLO per connection

    async def handle_EHLO(self, server, session, envelope, hostname, responses):  # noqa: N802
        self.greetings += 1
        session.host_name = hostname
        return responses

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):  # noqa: N802
        if address in self.refuse:
            return self.refuse[address]
        if self.defer.get(address, 0) > 0:
            self.defer[address] -= 1
            return "451 4.3.0 Mailbox busy, try again later"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 Recipient OK"

    async def handle_DATA(self, server, session, envelope):  # noqa: N802
        message = message_from_bytes(envelope.content, policy=policy.default)
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 2.0.0 Ok: queued as 4F2A9"

    def authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        if isinstance(auth_data, LoginPassword):
            login, password = auth_data.login.decode(), auth_data.password.decode()
            self.logins.append((login, password))
            return AuthResult(success=(login, password) == (SMTP_USER, SMTP_PASSWORD), handled=False)
        return AuthResult(success=False, handled=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class SmtpServer:
    host: str
    port: int
    mailbox: Mailbox


def _serve(mailbox: Mailbox, **kwargs: object) -> Iterator[SmtpServer]:
    port = free_port()
    controller = Controller(
        mailbox, hostname="127.0.0.1", port=port, authenticator=mailbox.authenticate, auth_require_tls=False,
        **kwargs,
    )  # fmt: skip
    controller.start()
    try:
        yield SmtpServer("127.0.0.1", port, mailbox)
    finally:
        controller.stop()


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    """A plain SMTP server (AUTH allowed without TLS, as on a local relay)."""
    yield from _serve(Mailbox())


@pytest.fixture
def starttls_server(certificate: Certificate) -> Iterator[SmtpServer]:
    yield from _serve(Mailbox(), tls_context=certificate.server_context(), require_starttls=True)


@pytest.fixture
def ssl_server(certificate: Certificate) -> Iterator[SmtpServer]:
    yield from _serve(Mailbox(), ssl_context=certificate.server_context())
