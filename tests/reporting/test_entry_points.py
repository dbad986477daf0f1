"""`fleet report RUN_DIR [--send]` and the `report` flow, against a real SMTP server."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Summary
from reporting.result import ReportDeliveryError
from reporting.run_report import OPERATOR, RenderedRun, render_run
from tests.reporting.conftest import SmtpServer


@pytest.fixture
def smtp_env(monkeypatch, smtp_server: SmtpServer) -> SmtpServer:
    for name, value in {"HOST": smtp_server.host, "PORT": str(smtp_server.port), "SECURITY": "none",
                        "TIMEOUT": "5", "RETRY_WAIT": "0.01"}.items():  # fmt: skip
        monkeypatch.setenv(f"FLEET_SMTP_{name}", value)
    monkeypatch.setenv("FLEET_MAIL_FROM", "reports@agency.example")
    monkeypatch.setenv("FLEET_REPORT_TO", "ops@agency.example")
    return smtp_server


def test_cli_renders_without_sending(run_copy: RenderedRun, smtp_env: SmtpServer):
    result = CliRunner().invoke(app, ["report", str(run_copy.run_dir)])
    assert result.exit_code == 0, result.output
    assert f"wrote {run_copy.run_dir / 'report' / 'operator.html'}" in result.output
    assert smtp_env.mailbox.received == [] and Summary.read(run_copy.run_dir).deliveries == []


def test_cli_sends_and_exits_non_zero_when_a_recipient_is_refused(run_copy: RenderedRun, smtp_env: SmtpServer):
    ok = CliRunner().invoke(app, ["report", str(run_copy.run_dir), "--send"])
    assert ok.exit_code == 0, ok.output
    assert "sent operator report to ops@agency.example: 250 " in ok.output
    assert len(smtp_env.mailbox.received) == 4

    smtp_env.mailbox.refuse["office@acmedental.com"] = "550 5.7.1 Rejected by policy"
    refused = CliRunner().invoke(app, ["report", str(run_copy.run_dir), "--send"])
    assert refused.exit_code == 1
    assert "Acme Dental report to office@acmedental.com not delivered: 550 5.7.1 Rejected by policy" in refused.output


def test_cli_names_a_missing_summary(tmp_path):
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no summary.json" in result.output


def test_cli_names_a_bad_mail_setting_in_one_line(run_copy: RenderedRun, smtp_env: SmtpServer, monkeypatch):
    monkeypatch.setenv("FLEET_SMTP_SECURITY", "tls")
    result = CliRunner().invoke(app, ["report", str(run_copy.run_dir), "--send"])
    assert result.exit_code == 2
    assert result.output.strip() == ("reports not sent: FLEET_SMTP_SECURITY (environment): Input should be 'ssl', "
                                     "'starttls' or 'none'")
    assert smtp_env.mailbox.received == []


def test_a_dry_run_mails_only_the_operator(run_copy: RenderedRun, smtp_env: SmtpServer):
    summary = Summary.read(run_copy.run_dir)
    summary.dry_run = True
    summary.write(run_copy.run_dir)
    result = render_run(run_copy.run_dir, send=True)
    assert result.ok and {d.report for d in result.deliveries} == {OPERATOR}
    [message] = smtp_env.mailbox.received
    assert "(dry run)" in message.message["Subject"]
    assert "Dry run." in message.message.get_body(("html",)).get_content()


async def test_report_flow_publishes_the_artifact_and_fails_visibly_on_refusal(
    prefect_harness, run_copy: RenderedRun, smtp_env: SmtpServer
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    from flows.report import report
    from orchestration.artifacts import artifact_key

    result = await report(str(run_copy.run_dir), send=True)
    assert result.ok and len(smtp_env.mailbox.received) == 4
    async with get_client() as client:
        key = artifact_key(run_copy.run_id)
        [artifact] = await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])), sort=ArtifactSort.CREATED_DESC, limit=1,
        )
    assert artifact.type == "markdown" and "](data:image/png;base64," in artifact.data
    assert "# Fleet maintenance report" in artifact.data

    smtp_env.mailbox.refuse["ops@agency.example"] = "550 5.1.1 No such user"
    state = await report(str(run_copy.run_dir), send=True, return_state=True)
    assert state.is_failed()
    with pytest.raises(ReportDeliveryError, match="operator report to ops@agency.example not delivered: 550"):
        await state.result()
    refused = [d for d in Summary.read(run_copy.run_dir).deliveries if not d.accepted]
    assert [(d.report, d.recipient) for d in refused if d.eml_path is None] == [(OPERATOR, "ops@agency.example")]
