"""FLEET_NOTIFY_BLOCK in an alert: a saved block gets one short line with the link, one that is not saved is said
in one line naming the variable while the e-mail still goes out, and bad mail settings do not silence it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reporting.alert import BreakNotice, deliver_alert
from reporting.settings import MailSettings

pytestmark = pytest.mark.usefixtures("prefect_harness")

NOTICE = BreakNotice(run_name="run-1", dashboard="dash.example.com", site_id=3, site="Shop (https://shop)",
                     step="plugin", release="Forms 1.3 → 1.4", did="could switch nothing off", saw="no answer",
                     next_steps="restart PHP", down=True, dashboard_page="https://dash/page/3",
                     run_url="http://prefect/runs/flow-run/1")


async def test_a_notify_block_not_saved_is_one_line_naming_it_and_the_mail_still_goes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEET_NOTIFY_BLOCK", "custom-webhook/nosuch")
    outcomes = await deliver_alert(NOTICE, MailSettings(), tmp_path)
    [eml] = tmp_path.glob("*.eml")
    assert "Shop (https://shop) is down" in eml.read_text()
    [line] = [outcome for outcome in outcomes if outcome.startswith("block ")]
    assert line.startswith("block custom-webhook/nosuch: not sent: FLEET_NOTIFY_BLOCK (environment): no saved "
                           "Prefect block 'custom-webhook/nosuch'"), line
    assert "\n" not in line


async def test_the_notify_block_gets_the_short_text_with_the_link(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    from prefect.blocks.notifications import NotificationBlock

    sent: list[tuple[str, str | None]] = []

    class Recorder(NotificationBlock):
        _block_type_slug = "fleet-test-recorder"

        def notify(self, body: str, subject: str | None = None) -> None:
            sent.append((body, subject))

        async def anotify(self, body: str, subject: str | None = None) -> None:  # what Prefect's own blocks have
            self.notify(body, subject)

    await Recorder().save("ops", overwrite=True)
    monkeypatch.setenv("FLEET_NOTIFY_BLOCK", "fleet-test-recorder/ops")
    outcomes = await deliver_alert(NOTICE, MailSettings(), tmp_path)
    assert "block fleet-test-recorder/ops: sent" in outcomes
    [(body, subject)] = sent
    assert body == NOTICE.short and body.endswith("http://prefect/runs/flow-run/1") and "\n" not in body
    assert subject == NOTICE.subject


def test_bad_mail_settings_leave_the_notify_block_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestration.night_alerts import night_mail_settings

    monkeypatch.setenv("FLEET_NOTIFY_BLOCK", "slack-webhook/ops")
    monkeypatch.setenv("FLEET_SMTP_PORT", "not a port")
    settings = night_mail_settings("site-down alert")
    assert settings.notify_block == "slack-webhook/ops" and not settings.configured


def test_a_block_not_saved_stops_fleet_nightly_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleet nightly` (and `fleet update`) may alert, as `fleet serve` does: the blocks are checked first."""
    from typer.testing import CliRunner

    from cli.app import app

    monkeypatch.setenv("FLEET_BASE_URL", "http://127.0.0.1:9/wp-json")  # never reached: the block comes first
    monkeypatch.setenv("FLEET_API_KEY", "secret==key")
    monkeypatch.setenv("FLEET_ALERT_BLOCKS", "custom-webhook/nosuch")
    for command in ("nightly", "update"):
        result = CliRunner().invoke(app, [command])
        assert result.exit_code == 2, result.output
        [line] = [line for line in result.output.splitlines() if line.startswith(f"{command} run not started")]
        assert line.startswith(f"{command} run not started: FLEET_ALERT_BLOCKS (environment): no saved Prefect "
                               "block 'custom-webhook/nosuch'"), line


def test_blocks_without_a_prefect_server_are_said_at_once_from_cron(tmp_path: Path) -> None:
    """From cron without PREFECT_API_URL a block cannot be found (a temporary server has none): one line at once,
    before a temporary server starts, and the operator's e-mail (here its file) says it too."""
    import os

    from tests.reporting.test_alert import fleet

    prefect_home = tmp_path / "prefect-home"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    env |= {"PREFECT_HOME": str(prefect_home), "FLEET_BASE_URL": "http://127.0.0.1:9/wp-json",
            "FLEET_API_KEY": "secret==key", "FLEET_NOTIFY_BLOCK": "slack-webhook/ops",
            "FLEET_REPORT_DIR": str(tmp_path / "reports")}
    done = fleet(["nightly"], env, tmp_path, terminal=False, inherit=False)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    [line] = [line for line in output.splitlines() if line.startswith("nightly run not started")]
    assert line == ("nightly run not started: FLEET_NOTIFY_BLOCK (environment) names the Prefect block "
                    "'slack-webhook/ops': a block lives on a Prefect server and PREFECT_API_URL is not set (a "
                    "temporary server holds no saved block): set PREFECT_API_URL to the server it was saved on, as "
                    "`fleet serve` needs"), output
    assert "block slack-webhook/ops: not sent: a block lives on a Prefect server" in output, output
    [eml] = (tmp_path / "reports" / "alerts").glob("not-started-*.eml")
    from email import message_from_bytes, policy

    assert line in message_from_bytes(eml.read_bytes(), policy=policy.default).get_body(("plain",)).get_content()
    assert not list(prefect_home.rglob("*.db")), "a temporary Prefect server was started"


async def test_a_slack_block_pointed_at_an_address_not_slacks_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Apprise knows no Slack webhook but Slack's own address: a Slack block pointed at a chat of one's own sent
    nothing and raised nothing. The check before the night refuses it, and an alert says so for that channel."""
    from prefect.blocks.notifications import SlackWebhook

    from dashboard.home import SettingsError
    from reporting.alert import check_alert_blocks

    await SlackWebhook(url="http://127.0.0.1:9/hooks/ops").save("self-hosted", overwrite=True)
    monkeypatch.setenv("FLEET_NOTIFY_BLOCK", "slack-webhook/self-hosted")
    with pytest.raises(SettingsError) as raised:
        await check_alert_blocks(MailSettings())
    said = str(raised.value)
    assert said.startswith("FLEET_NOTIFY_BLOCK (environment): the block 'slack-webhook/self-hosted' is a Slack webhook "
                           "whose address is not Slack's"), said
    assert "custom-webhook" in said and "127.0.0.1" not in said  # the address may hold a token: never shown
    outcomes = await deliver_alert(NOTICE, MailSettings(), tmp_path)
    assert any(line.startswith("block slack-webhook/self-hosted: not sent: FLEET_NOTIFY_BLOCK (environment): the "
                               "block 'slack-webhook/self-hosted' is a Slack webhook") for line in outcomes), outcomes
