"""A client whose site the night broke is not mailed automatically: the operator gets the report marked
"held for review" and releases it with `fleet report RUN --send --client NAME`. Over a real SMTP server."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import SiteAlarm, Summary, Suspect, UpdateType
from reporting.run_report import render_run
from tests.reporting.builder import build_summary
from tests.reporting.conftest import SMTP_PASSWORD, SMTP_USER, SmtpServer
from tests.reporting.test_mail import OPERATORS, settings_for

CLIENT = "Northwind Bakery"
CLIENT_ADDRESS = "hello@northwindbakery.co.uk"


@pytest.fixture
def broken_night(tmp_path: Path) -> Path:
    summary = build_summary(date(2026, 3, 9))
    site = next(site for site in summary.sites if site.site_url == "https://shop.northwindbakery.co.uk")
    summary.broken = [SiteAlarm(site_id=site.site_id, site_url=site.site_url, site_name=site.site_name,
                                client=CLIENT, saw="home page shows a PHP/WordPress error",
                                dashboard_page="https://dashboard.agency.example/wp-admin/admin.php?page=managesites",
                                suspects=[Suspect(type=UpdateType.plugin, slug="woocommerce/woocommerce.php",
                                                  name="WooCommerce", from_version="9.1.0", to_version="9.2.0")])]
    summary.clients = [client.model_copy(update={"held_for_review": "the night broke Northwind Shop"})
                       if client.name == CLIENT else client for client in summary.clients]
    run_dir = tmp_path / summary.run_id
    summary.write(run_dir)
    return run_dir


def test_the_broken_clients_report_goes_to_the_operator_marked_and_is_released_on_demand(
    broken_night: Path, smtp_server: SmtpServer, monkeypatch
):
    result = render_run(broken_night, send=True, settings=settings_for(smtp_server))

    assert result.ok, result.problems  # a held report is not a failed delivery
    addressed = {address for received in smtp_server.mailbox.received for address in received.rcpt_tos}
    assert CLIENT_ADDRESS not in addressed and "office@acmedental.com" in addressed
    held = [r.message for r in smtp_server.mailbox.received if r.message["Subject"].startswith("[held for review]")]
    assert len(held) == 1 and CLIENT in held[0]["Subject"] and held[0]["To"] == ", ".join(OPERATORS)
    text = held[0].get_body(("plain",)).get_content()
    assert "WooCommerce 9.1.0 → 9.2.0" in text
    [record] = [d for d in Summary.read(broken_night).deliveries if d.held]
    assert record.report == CLIENT and record.recipient == CLIENT_ADDRESS and f"--client '{CLIENT}'" in record.answer

    for name, value in {"FLEET_SMTP_HOST": smtp_server.host, "FLEET_SMTP_PORT": str(smtp_server.port),
                        "FLEET_SMTP_SECURITY": "none", "FLEET_SMTP_USER": SMTP_USER,
                        "FLEET_SMTP_PASSWORD": SMTP_PASSWORD, "FLEET_REPORT_TO": OPERATORS[0],
                        "FLEET_MAIL_FROM": "reports@agency.example"}.items():
        monkeypatch.setenv(name, value)
    smtp_server.mailbox.received.clear()
    released = CliRunner().invoke(app, ["report", str(broken_night), "--send", "--client", CLIENT])
    assert released.exit_code == 0, released.output
    [message] = smtp_server.mailbox.received
    assert message.rcpt_tos == [CLIENT_ADDRESS] and not message.message["Subject"].startswith("[held")
    assert f"sent {CLIENT} report to {CLIENT_ADDRESS}" in released.output

    unknown = CliRunner().invoke(app, ["report", str(broken_night), "--send", "--client", "Nobody"])
    assert unknown.exit_code == 2 and "no report for client 'Nobody'" in unknown.output


def test_a_dry_runs_report_is_never_sent_to_a_client(broken_night: Path, smtp_server: SmtpServer, monkeypatch):
    summary = Summary.read(broken_night)
    summary.dry_run = True
    summary.write(broken_night)
    monkeypatch.setenv("FLEET_SMTP_HOST", smtp_server.host)
    monkeypatch.setenv("FLEET_SMTP_PORT", str(smtp_server.port))
    monkeypatch.setenv("FLEET_SMTP_SECURITY", "none")
    monkeypatch.setenv("FLEET_MAIL_FROM", "reports@agency.example")
    result = CliRunner().invoke(app, ["report", str(broken_night), "--send", "--client", CLIENT])
    assert result.exit_code == 2 and "is a dry run" in result.output
    assert smtp_server.mailbox.received == []
