"""Delivery over a real SMTP server (aiosmtpd on a loopback port), refusals, retries, TLS and the .eml fallback."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

import pytest
from pydantic import SecretStr

from fleet.model.summary import Summary
from reporting.render import data_uri
from reporting.result import ReportDeliveryError, delivery_problems
from reporting.run_report import OPERATOR, RenderedReport, RenderedRun, deliver_reports
from reporting.settings import MailSettings, SmtpSecurity
from tests.reporting.conftest import SMTP_PASSWORD, SMTP_USER, SmtpServer, body
from tests.tls import Certificate

OPERATORS = ["ops@agency.example", "oncall@agency.example"]
CLIENT_ADDRESSES = {
    "Acme Dental": ["office@acmedental.com"],
    "Birch & Co Architects": ["it@birchandco.com"],  # the policy's recipients beat the dashboard's e-mail
    "Northwind Bakery": ["hello@northwindbakery.co.uk"],
}


def settings_for(server: SmtpServer, **overrides: object) -> MailSettings:
    values: dict[str, object] = {
        "smtp_host": server.host, "smtp_port": server.port, "smtp_security": SmtpSecurity.none,
        "smtp_user": SMTP_USER, "smtp_password": SecretStr(SMTP_PASSWORD), "smtp_timeout": 5,
        "smtp_retry_wait": 0.01, "mail_from": "Fleet reports <reports@agency.example>", "report_to": OPERATORS,
    }  # fmt: skip
    return MailSettings(_env_file=None, **{**values, **overrides})


def test_operator_and_client_messages_arrive_with_both_parts_charts_and_the_right_recipients(
    run_copy: RenderedRun, smtp_server: SmtpServer
):
    deliveries = deliver_reports(run_copy, settings_for(smtp_server))

    received = {r.message["Subject"].strip(): r for r in smtp_server.mailbox.received}  # a folded header
    assert smtp_server.mailbox.logins == [(SMTP_USER, SMTP_PASSWORD)] * len(received)
    by_report = {report.name: report for report in run_copy.reports}
    expected_recipients = {OPERATOR: OPERATORS, **CLIENT_ADDRESSES}
    assert len(received) == len(expected_recipients)  # Orchard Physio has no address: written to a file instead
    for name, recipients in expected_recipients.items():
        report = by_report[name]
        got = received[report.subject]
        assert got.rcpt_tos == recipients
        assert [a.strip() for a in got.message["To"].split(",")] == recipients
        assert_is_the_report(got.message, run_copy, report)
    accepted = {(d.report, d.recipient) for d in deliveries if d.accepted}
    assert accepted == {(n, r) for n, rs in expected_recipients.items() for r in rs}
    # the server's answer to the message, once (not the recipient's "250 2.1.5 Recipient OK" before it)
    assert {d.answer for d in deliveries if d.accepted} == {"250 2.0.0 Ok: queued as 4F2A9"}
    orchard = [d for d in deliveries if d.report == "Orchard Physio"]
    assert len(orchard) == 1 and not orchard[0].accepted and Path(orchard[0].eml_path).is_file()
    assert delivery_problems(deliveries) == []
    assert Summary.read(run_copy.run_dir).deliveries == deliveries  # recorded into summary.json


def assert_is_the_report(message: EmailMessage, rendered: RenderedRun, report: RenderedReport) -> None:
    """The message is the report's files: text as written, HTML as written with each chart attached by Content-ID."""
    text = message.get_body(("plain",)).get_content()
    html = message.get_body(("html",)).get_content()
    assert text.replace("\r\n", "\n") == body(rendered, report, ".txt")
    images = {part["Content-ID"]: part.get_content() for part in message.walk()
              if part.get_content_type() == "image/png"}  # fmt: skip
    charts = {f"<{cid}>": rendered.chart_path(report, cid).read_bytes() for cid in report.charts}
    # the operator's: outcomes per night and failure rate per plugin over the fleet; a client's: outcomes only
    assert images == charts and len(images) == (2 if report.name == OPERATOR else 1)
    assert "data:image" not in html and html.count('src="cid:') == len(images)
    for cid, png in charts.items():
        html = html.replace(f'src="cid:{cid.strip("<>")}"', f'src="{data_uri(png)}"')
    assert html.replace("\r\n", "\n") == body(rendered, report, ".html") + "\n"  # MIME ends text parts in one


def test_messages_are_built_from_the_files_and_need_only_the_names_from_the_render(
    run_copy: RenderedRun, smtp_server: SmtpServer
):
    # What the render returns survives a trip through JSON (as between processes): names and paths only.
    light = json.loads(json.dumps(dataclasses.asdict(run_copy), default=str))
    rendered = RenderedRun(
        Path(light["run_dir"]), light["run_id"], light["dry_run"],
        [RenderedReport(**{**r, "charts": tuple(r["charts"])}) for r in light["reports"]],
    )  # fmt: skip
    acme = next(r for r in rendered.reports if r.name == "Acme Dental")
    note = "Note from your agency: the booking page was checked by hand.\n"
    rendered.path(acme, ".txt").write_text(note + body(rendered, acme, ".txt"), encoding="utf-8")

    deliver_reports(rendered, settings_for(smtp_server))
    received = {r.message["Subject"].strip(): r.message for r in smtp_server.mailbox.received}
    assert len(received) == 4
    for report in rendered.reports:
        if report.subject in received:
            assert_is_the_report(received[report.subject], rendered, report)
    assert received[acme.subject].get_body(("plain",)).get_content().replace("\r\n", "\n").startswith(note)


def test_a_refusing_server_is_recorded_as_refused_and_fails_visibly(run_copy: RenderedRun, smtp_server: SmtpServer):
    smtp_server.mailbox.refuse["oncall@agency.example"] = "550 5.1.1 <oncall@agency.example>: mailbox unavailable"
    deliveries = deliver_reports(run_copy, settings_for(smtp_server))

    refused = [d for d in deliveries if not d.accepted and d.eml_path is None]
    assert [(d.report, d.recipient) for d in refused] == [(OPERATOR, "oncall@agency.example")]
    assert refused[0].answer == "550 5.1.1 <oncall@agency.example>: mailbox unavailable"
    assert any(d.recipient == "ops@agency.example" and d.accepted for d in deliveries)
    recorded = Summary.read(run_copy.run_dir).deliveries
    assert [d for d in recorded if not d.accepted and d.eml_path is None] == refused
    problems = delivery_problems(deliveries)
    assert problems == ["operator report to oncall@agency.example not delivered: " + refused[0].answer]


def test_a_busy_mailbox_is_retried_with_backoff_until_it_accepts(run_copy: RenderedRun, smtp_server: SmtpServer):
    smtp_server.mailbox.defer["ops@agency.example"] = 2
    deliveries = deliver_reports(run_copy, settings_for(smtp_server, smtp_attempts=3))
    ops = [d for d in deliveries if d.recipient == "ops@agency.example"]
    assert len(ops) == 1 and ops[0].accepted
    operator_copies = [r for r in smtp_server.mailbox.received if "ops@agency.example" in r.rcpt_tos]
    assert len(operator_copies) == 1  # the other operator got it on the first try, and only once


def test_retries_end_and_the_last_answer_is_recorded(run_copy: RenderedRun, smtp_server: SmtpServer):
    smtp_server.mailbox.defer["ops@agency.example"] = 10
    deliveries = deliver_reports(run_copy, settings_for(smtp_server, smtp_attempts=2))
    ops = [d for d in deliveries if d.recipient == "ops@agency.example"]
    assert not ops[0].accepted and ops[0].answer.startswith("451 4.3.0")


def test_an_unreachable_server_fails_every_recipient_with_the_reason(run_copy: RenderedRun, caplog):
    from tests.reporting.conftest import free_port

    settings = MailSettings(_env_file=None, smtp_host="127.0.0.1", smtp_port=free_port(), smtp_security="none",
                            smtp_attempts=3, smtp_retry_wait=0.01, report_to=OPERATORS, mail_from=OPERATORS[0],
                            smtp_user=SMTP_USER, smtp_password=SMTP_PASSWORD)  # fmt: skip
    with caplog.at_level(logging.DEBUG):
        deliveries = deliver_reports(run_copy, settings)
    failed = [d for d in deliveries if d.eml_path is None]
    assert failed and not any(d.accepted for d in failed)
    assert all("ConnectionRefusedError" in d.answer for d in failed)
    tries = [int(n) for n in re.findall(r"giving up after (\d+) tries", caplog.text)]
    assert tries == [3, 1, 1, 1]  # a server that is down is not waited out once per client
    assert SMTP_PASSWORD not in caplog.text and SMTP_PASSWORD not in repr(settings)


def test_wrong_credentials_are_refused_without_retry_and_without_leaking(run_copy: RenderedRun, smtp_server):
    settings = settings_for(smtp_server, smtp_password=SecretStr("wrong-" + SMTP_PASSWORD), smtp_attempts=3)
    deliveries = deliver_reports(run_copy, settings)
    assert smtp_server.mailbox.greetings == 4  # one connection for each of the four addressed reports: no retry
    assert all(not d.accepted for d in deliveries)
    assert all(d.answer.startswith("authentication failed: 535") for d in deliveries if d.eml_path is None)
    with pytest.raises(ReportDeliveryError) as raised:
        from reporting.result import ReportResult

        ReportResult(run_id="r", run_dir=run_copy.run_dir, reports=[], deliveries=deliveries,
                     problems=delivery_problems(deliveries)).raise_for_problems()  # fmt: skip
    assert "authentication failed" in str(raised.value) and SMTP_PASSWORD not in str(raised.value)


@pytest.mark.parametrize("security", [SmtpSecurity.starttls, SmtpSecurity.ssl])
def test_tls_is_verified_and_carries_the_messages(
    security: SmtpSecurity, run_copy: RenderedRun, certificate: Certificate, request
):
    server: SmtpServer = request.getfixturevalue(f"{security.value}_server")
    untrusted = deliver_reports(run_copy, settings_for(server, smtp_security=security, smtp_attempts=1))
    assert all("CERTIFICATE_VERIFY_FAILED" in d.answer for d in untrusted if d.eml_path is None)
    assert server.mailbox.received == []

    trusted = deliver_reports(run_copy, settings_for(server, smtp_security=security, smtp_ca_file=certificate.cert))
    assert delivery_problems(trusted) == []
    assert len(server.mailbox.received) == 4 and server.mailbox.logins[0] == (SMTP_USER, SMTP_PASSWORD)


def test_without_smtp_settings_the_messages_are_written_as_eml_files(run_copy: RenderedRun):
    deliveries = deliver_reports(run_copy, MailSettings(_env_file=None, report_to=OPERATORS))
    assert delivery_problems(deliveries) == []
    files = sorted({Path(d.eml_path) for d in deliveries})
    assert [f.parent for f in files] == [run_copy.run_dir] * 5  # beside summary.json
    operator = message_from_bytes((run_copy.run_dir / "operator.eml").read_bytes(), policy=policy.default)
    assert operator["To"] == ", ".join(OPERATORS)
    assert operator.get_body(("plain",)) is not None and operator.get_body(("html",)) is not None
    assert [d.recipient for d in deliveries if d.report == OPERATOR] == OPERATORS


def test_the_smtp_password_never_appears_in_any_output(run_copy: RenderedRun, smtp_server: SmtpServer):
    settings = settings_for(smtp_server)
    deliver_reports(run_copy, settings)
    smtp_server.mailbox.refuse["ops@agency.example"] = "550 no"
    deliver_reports(run_copy, settings)
    for path in run_copy.run_dir.rglob("*"):
        if path.is_file():
            assert SMTP_PASSWORD.encode() not in path.read_bytes(), path
    for received in smtp_server.mailbox.received:
        assert SMTP_PASSWORD not in received.message.as_string()
    assert SMTP_PASSWORD not in repr(settings) and SMTP_PASSWORD not in settings.model_dump_json()


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("FLEET_SMTP_HOST", "smtp.agency.example")
    monkeypatch.setenv("FLEET_SMTP_SECURITY", "ssl")
    monkeypatch.setenv("FLEET_SMTP_USER", SMTP_USER)
    monkeypatch.setenv("FLEET_SMTP_PASSWORD", SMTP_PASSWORD)
    monkeypatch.setenv("FLEET_MAIL_FROM", "reports@agency.example")
    monkeypatch.setenv("FLEET_REPORT_TO", " ops@agency.example, oncall@agency.example ,")
    settings = MailSettings(_env_file=None)
    assert (settings.smtp_host, settings.port, settings.smtp_security) == ("smtp.agency.example", 465, "ssl")
    assert settings.report_to == OPERATORS and settings.smtp_password.get_secret_value() == SMTP_PASSWORD
    monkeypatch.setenv("FLEET_REPORT_TO", "ops@agency.example,not-an-address")
    with pytest.raises(ValueError, match="not an e-mail address: 'not-an-address'"):
        MailSettings(_env_file=None)


def test_settings_come_from_the_prefect_email_block(monkeypatch):
    from prefect_email import EmailServerCredentials

    monkeypatch.setenv("FLEET_REPORT_TO", "ops@agency.example")
    monkeypatch.setenv("FLEET_MAIL_FROM", "reports@agency.example")
    block = EmailServerCredentials(username=SMTP_USER, password=SMTP_PASSWORD, smtp_server="mail.agency.example",
                                   smtp_type="STARTTLS")  # fmt: skip
    settings = MailSettings.from_credentials(block, _env_file=None)
    assert (settings.smtp_host, settings.port, settings.smtp_security) == ("mail.agency.example", 587, "starttls")
    assert settings.smtp_user == SMTP_USER and settings.smtp_password.get_secret_value() == SMTP_PASSWORD
    assert settings.report_to == ["ops@agency.example"] and settings.smtp_verify_tls


def test_a_real_send_needs_a_sender_and_a_file_does_not():
    with pytest.raises(ValueError, match="mail_from\n  mail sent over SMTP \\(FLEET_SMTP_HOST\\) needs a sender"):
        MailSettings(_env_file=None, smtp_host="smtp.agency.example")
    eml = MailSettings(_env_file=None)
    assert eml.sender == "fleet-maintenance@localhost" and eml.replies_to() is None  # nobody reads a reply to it
    named = MailSettings(_env_file=None, smtp_host="smtp.agency.example", mail_from="Reports <reports@agency.example>")
    assert named.sender == "Reports <reports@agency.example>" and named.replies_to() == named.sender
    for bad in ("reports", "a@b.example\r\nBcc: x@y.example"):
        with pytest.raises(ValueError, match="not an e-mail address"):
            MailSettings(_env_file=None, mail_from=bad)


def footer(rendered: RenderedRun, name: str, suffix: str = ".txt") -> str:
    """A report's footer (the text's, after its `--`), or its whole HTML."""
    text = body(rendered, next(report for report in rendered.reports if report.name == name), suffix)
    return text.rsplit("\n--\n", 1)[-1] if suffix == ".txt" else text


def test_a_reply_reaches_whom_the_clients_footer_promises(run_copy: RenderedRun, smtp_server: SmtpServer):
    """FLEET_REPLY_TO for every message; a client's own `reply_to` (the policy's, in summary.json) for its report;
    the footer promises what the Reply-To header says, and nothing when no reply would reach anyone."""
    from reporting.run_report import render_run

    summary = Summary.read(run_copy.run_dir)
    for client in summary.clients:
        if client.name == "Acme Dental":
            client.reply_to = "care@agency.example"
    summary.write(run_copy.run_dir)
    result = render_run(run_copy.run_dir, send=True,
                        settings=settings_for(smtp_server, reply_to="help@agency.example"))
    assert result.ok, result.problems
    received = {r.message["Subject"].strip(): r.message for r in smtp_server.mailbox.received}
    rendered = run_copy  # its files were written again, with the promise
    by_name = {report.name: report for report in rendered.reports}
    acme, birch = received[by_name["Acme Dental"].subject], received[by_name["Birch & Co Architects"].subject]
    operator = received[by_name[OPERATOR].subject]
    assert acme["Reply-To"] == "care@agency.example" and acme["From"] == "Fleet reports <reports@agency.example>"
    assert birch["Reply-To"] == operator["Reply-To"] == "help@agency.example"
    assert "Questions? Just reply to this e-mail: it reaches care@agency.example." in footer(rendered, "Acme Dental")
    assert "it reaches care@agency.example." in footer(rendered, "Acme Dental", ".html")
    assert "it reaches help@agency.example." in footer(rendered, "Birch & Co Architects")
    assert "Questions?" not in footer(rendered, OPERATOR)

    plain = render_run(run_copy.run_dir, send=True, settings=MailSettings(_env_file=None, report_to=OPERATORS))
    assert plain.ok  # written as .eml files to forward by hand: no sender, so no promise of an answer
    assert "Questions?" not in footer(rendered, "Birch & Co Architects")
    assert "it reaches care@agency.example." in footer(rendered, "Acme Dental")  # its own address still answers
    birch_eml = message_from_bytes((run_copy.run_dir / f"{by_name['Birch & Co Architects'].file_stem}.eml")
                                   .read_bytes(), policy=policy.default)
    assert birch_eml["Reply-To"] is None and birch_eml["From"] == "fleet-maintenance@localhost"


@pytest.mark.parametrize("with_block", [False, True])
def test_unusable_mail_settings_of_a_flow_are_one_line_naming_the_variable(monkeypatch, with_block: bool):
    """What the night over many dashboards says before its nights (flows/dashboards.py), as a single night does."""
    from prefect_email import EmailServerCredentials

    from dashboard.home import SettingsError

    monkeypatch.delenv("FLEET_MAIL_FROM", raising=False)
    monkeypatch.setenv("FLEET_SMTP_HOST", "smtp.agency.example")
    block = EmailServerCredentials(smtp_server="smtp.agency.example", username="u", password="hunter2")
    with pytest.raises(SettingsError) as caught:
        MailSettings.for_block(block if with_block else None)
    said = str(caught.value)
    assert said.startswith("FLEET_MAIL_FROM (not set: not in the environment, nor in ") and said.endswith(
        "): mail sent over SMTP (FLEET_SMTP_HOST) needs a sender address that replies can reach")
