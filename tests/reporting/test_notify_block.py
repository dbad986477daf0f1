"""FLEET_NOTIFY_BLOCK in an alert: a saved block gets one short line with the link, one that is not saved is said
in one line naming the variable while the e-mail still goes out, and bad mail settings do not silence it."""

from __future__ import annotations

from pathlib import Path

import pytest

from reporting.alert import SiteDownNotice, deliver_alert
from reporting.settings import MailSettings

pytestmark = pytest.mark.usefixtures("prefect_harness")

NOTICE = SiteDownNotice(run_name="run-1", dashboard="dash.example.com", site_id=3, site="Shop (https://shop)",
                        step="plugin", what_happened="the child does not answer", next_steps="restart PHP",
                        dashboard_page="https://dash/page/3", run_url="http://prefect/runs/flow-run/1")


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
    from tasks.contain import night_mail_settings

    monkeypatch.setenv("FLEET_NOTIFY_BLOCK", "slack-webhook/ops")
    monkeypatch.setenv("FLEET_SMTP_PORT", "not a port")
    settings = night_mail_settings("site-down alert")
    assert settings.notify_block == "slack-webhook/ops" and not settings.configured
