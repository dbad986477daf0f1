"""`fleet blocks save` stores the environment's credentials as Prefect blocks that load back intact."""

from __future__ import annotations

import pytest
from prefect_email import EmailServerCredentials
from typer.testing import CliRunner

from cli.app import app
from dashboard.block import DashboardConnection

pytestmark = pytest.mark.usefixtures("prefect_harness")

ENV = {
    "FLEET_BASE_URL": "https://dash.example.com/wp-json",
    "FLEET_API_KEY": "s3cr3t-token==k3y",
    "FLEET_ABILITIES_USER": "admin",
    "FLEET_ABILITIES_PASSWORD": "abcd efgh ijkl mnop",
    "FLEET_NAMESPACE": "mainwp",
    "FLEET_SMTP_HOST": "smtp.example.com",
    "FLEET_SMTP_SECURITY": "ssl",
    "FLEET_SMTP_USER": "reports",
    "FLEET_SMTP_PASSWORD": "mail-pass-123",
    "FLEET_MAIL_FROM": "reports@example.com",  # the sender is not in the block, but mail over SMTP needs one
}


def test_blocks_save_round_trip_without_printing_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["blocks", "save", "--dashboard", "prod", "--email", "mail"])
    assert result.exit_code == 0, result.output
    for secret in ("s3cr3t-token", "abcd efgh", "mail-pass-123"):
        assert secret not in result.output

    settings = DashboardConnection.load("prod").settings()
    assert settings.base_url == ENV["FLEET_BASE_URL"] and settings.namespace == "mainwp"
    assert settings.api_key is not None and settings.api_key.get_secret_value() == ENV["FLEET_API_KEY"]
    assert settings.abilities_password is not None
    assert settings.abilities_password.get_secret_value() == ENV["FLEET_ABILITIES_PASSWORD"]
    mail = EmailServerCredentials.load("mail")
    assert (mail.smtp_server, mail.smtp_port, mail.username) == ("smtp.example.com", 465, "reports")
    assert mail.password.get_secret_value() == "mail-pass-123"

    again = CliRunner().invoke(app, ["blocks", "save", "--dashboard", "prod"])
    assert again.exit_code == 2 and "overwrite" in again.output.lower()
    assert CliRunner().invoke(app, ["blocks", "save", "--dashboard", "prod", "--overwrite"]).exit_code == 0


def test_an_email_block_is_not_saved_from_settings_that_could_not_send(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("FLEET_MAIL_FROM")
    result = CliRunner().invoke(app, ["blocks", "save", "--email", "mail-without-sender"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "FLEET_MAIL_FROM (not set: not in the environment" in said
    assert "mail-pass-123" not in result.output


def test_blocks_save_names_a_missing_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_BASE_URL", raising=False)
    monkeypatch.chdir("/")  # no .env here
    result = CliRunner().invoke(app, ["blocks", "save"])
    assert result.exit_code == 2
    assert "FLEET_BASE_URL (not set: not in the environment" in result.output and "Field required" in result.output
