"""The operator's alert when a night fails: a short message by e-mail (or `.eml`) and through Prefect
notification blocks (Slack, a custom webhook, ... saved in Prefect and named in FLEET_ALERT_BLOCKS)."""

from __future__ import annotations

import asyncio
import html
import logging
from dataclasses import dataclass
from pathlib import Path

from reporting.mail import Outgoing, build_message, send, write_eml
from reporting.settings import MailSettings

log = logging.getLogger(__name__)
ERROR_LINES = 8


@dataclass(frozen=True)
class Alert:
    flow: str
    run_name: str
    run_id: str
    state: str  # Failed, Crashed
    dashboard: str  # the host, never a URL's credentials
    error: str
    ui_url: str | None = None

    @property
    def subject(self) -> str:
        return f"fleet-maintenance: {self.flow} run {self.run_name} {self.state.lower()} (dashboard {self.dashboard})"

    @property
    def first_lines(self) -> list[str]:
        lines = [line.rstrip() for line in self.error.strip().splitlines() if line.strip()]
        more = [f"… ({len(lines) - ERROR_LINES} more lines)"] if len(lines) > ERROR_LINES else []
        return lines[:ERROR_LINES] + more

    @property
    def body(self) -> str:
        where = [f"Prefect: {self.ui_url}"] if self.ui_url else []
        return "\n".join([
            f"The {self.flow} run {self.run_name} ended {self.state}.",
            f"Dashboard: {self.dashboard}",
            f"Run id: {self.run_id}",
            *where,
            "",
            "Error:",
            *(f"  {line}" for line in self.first_lines),
        ])


def alert_email(alert: Alert, settings: MailSettings) -> Outgoing:
    body = alert.body
    message = build_message(sender=settings.mail_from, recipients=settings.report_to, subject=alert.subject,
                            text=body, html=f"<pre>{html.escape(body)}</pre>", images={})
    return Outgoing("alert", settings.report_to, message, f"alert-{alert.run_id}")


async def deliver_alert(alert: Alert, settings: MailSettings, out_dir: Path) -> list[str]:
    """Send the alert on every channel; returns one line per channel. A channel that fails is logged, never
    raised: the alert must not hide the failure it reports."""
    outcomes = []
    outgoing = alert_email(alert, settings)
    if settings.configured and settings.report_to:
        sent = await asyncio.to_thread(send, settings, outgoing)
        outcomes += [f"e-mail to {d.recipient}: {d.answer}" for d in sent.deliveries]
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        why = "no SMTP host configured (FLEET_SMTP_HOST)" if not settings.configured else "FLEET_REPORT_TO is empty"
        outcomes += [f"e-mail: {d.answer}" for d in await asyncio.to_thread(write_eml, outgoing, out_dir, why)]
    from prefect.blocks.core import Block
    from prefect.blocks.notifications import NotificationBlock

    for name in settings.alert_blocks:
        try:
            block = await Block.aload(name)
            if not isinstance(block, NotificationBlock):
                raise TypeError(f"{type(block).__name__} is not a notification block")
            await block.anotify(alert.body, alert.subject)
            outcomes.append(f"block {name}: sent")
        except Exception as error:  # noqa: BLE001 - every channel is tried, each failure said
            outcomes.append(f"block {name}: not sent: {type(error).__name__}: {error}")
    for outcome in outcomes:
        log.warning("alert for run %s: %s", alert.run_name, outcome)
    return outcomes
