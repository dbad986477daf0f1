"""The operator's alerts: a night that failed, a site down, or a night waiting at its approval gate. A short message
by e-mail (or `.eml`), through the Prefect notification blocks named in FLEET_ALERT_BLOCKS (the same message), and
as one short text with its link through the block named in FLEET_NOTIFY_BLOCK (chat, a pager: where operators
look)."""

from __future__ import annotations

import asyncio
import html
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dashboard.home import SettingsError, setting_source
from reporting.mail import Outgoing, build_message, send, write_eml
from reporting.settings import MailSettings

if TYPE_CHECKING:
    from prefect.blocks.notifications import NotificationBlock

log = logging.getLogger(__name__)
SLACK_WEBHOOK = re.compile(r"^https://hooks\.slack(-gov)?\.com/services/[A-Z0-9]+/[A-Z0-9]+/[A-Z0-9]+/?$", re.I)
ERROR_LINES = 8
SHORT_ERROR = 200  # characters of the error in the short text


def short_text(line: str, link: str | None) -> str:
    """One short text for a chat or a pager: what happened, then where to look."""
    line = line if len(line) <= SHORT_ERROR * 2 else line[:SHORT_ERROR * 2 - 1] + "…"
    return f"{line} {link}" if link else line


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

    @property
    def short(self) -> str:
        first = self.first_lines[0] if self.first_lines else self.state
        first = first if len(first) <= SHORT_ERROR else first[:SHORT_ERROR - 1] + "…"
        return short_text(f"fleet-maintenance: the {self.flow} run {self.run_name} ended {self.state} "
                          f"(dashboard {self.dashboard}): {first}", self.ui_url)

    @property
    def file_stem(self) -> str:
        return f"alert-{self.run_id}"


@dataclass(frozen=True)
class ApprovalNotice:
    """A night paused at its approval gate: what waits for a person, until when, and where to answer."""

    flow: str
    run_name: str
    run_id: str
    dashboard: str
    items: tuple[str, ...]  # "site: item from -> to (why)"
    until: str
    ui_url: str | None = None

    @property
    def subject(self) -> str:
        return (f"fleet-maintenance: {len(self.items)} update(s) wait for your approval "
                f"(dashboard {self.dashboard}, run {self.run_name})")

    @property
    def body(self) -> str:
        where = [f"Answer in the Prefect UI: {self.ui_url}"] if self.ui_url else []
        shown = [f"  {line}" for line in self.items[:ERROR_LINES * 5]]
        more = [f"  … and {len(self.items) - len(shown)} more"] if len(self.items) > len(shown) else []
        return "\n".join([
            f"The {self.flow} run {self.run_name} waits for a person until {self.until}; then the updates below",
            "stay held and nothing more is applied.",
            f"Dashboard: {self.dashboard}",
            *where,
            f"Or from a terminal: fleet approve {self.run_id} --all   (or --item SITE:SLUG)",
            "",
            *shown,
            *more,
        ])

    @property
    def short(self) -> str:
        return short_text(f"fleet-maintenance: {len(self.items)} update(s) wait for your approval until {self.until} "
                          f"(dashboard {self.dashboard}, run {self.run_name})", self.ui_url)

    @property
    def file_stem(self) -> str:
        return f"approval-{self.run_id}"


@dataclass(frozen=True)
class SiteDownNotice:
    """Sent during the night, the moment an update step leaves a site whose MainWP Child no longer answers: only
    someone on the server can bring it back, and what to do there."""

    run_name: str  # the night's run id
    dashboard: str
    site_id: int
    site: str  # name and address
    step: str
    what_happened: str
    next_steps: str
    dashboard_page: str | None = None
    run_url: str | None = None  # the flow run in the Prefect UI

    @property
    def subject(self) -> str:
        return f"fleet-maintenance: {self.site} is down, unreachable by the dashboard (run {self.run_name})"

    @property
    def short(self) -> str:
        return short_text(f"fleet-maintenance: {self.site} is down after the {self.step} updates of run "
                          f"{self.run_name} (dashboard {self.dashboard}): {self.next_steps}",
                          self.run_url or self.dashboard_page)

    @property
    def body(self) -> str:
        page = [f"Its page on the dashboard: {self.dashboard_page}"] if self.dashboard_page else []
        return "\n".join([
            f"The {self.step} updates of run {self.run_name} left {self.site} down: {self.what_happened}.",
            f"Dashboard: {self.dashboard}",
            *page,
            "",
            "What to do now:",
            f"  {self.next_steps}",
            "",
            "The night sends this site nothing more and holds the versions it applied; it goes on with the others.",
        ])

    @property
    def file_stem(self) -> str:
        return f"site-down-{self.run_name}-{self.site_id}"


@dataclass(frozen=True)
class StillDownNotice:
    """A site a night broke is still down on a later night: the operator hears of it again, at most once a day."""

    run_name: str  # tonight's run id
    dashboard: str
    incident_id: int
    site: str  # name and address
    opened_by: str
    age_days: int
    saw: str
    done: str
    next_steps: str
    dashboard_page: str | None = None
    run_url: str | None = None  # tonight's flow run in the Prefect UI

    @property
    def short(self) -> str:
        return short_text(f"fleet-maintenance: {self.site} is still down, {self.age_days} day(s) after run "
                          f"{self.opened_by} (incident {self.incident_id}, dashboard {self.dashboard})",
                          self.run_url or self.dashboard_page)

    @property
    def subject(self) -> str:
        return (f"fleet-maintenance: {self.site} is still down, {self.age_days} day(s) after run {self.opened_by} "
                f"(incident {self.incident_id})")

    @property
    def body(self) -> str:
        page = [f"Its page on the dashboard: {self.dashboard_page}"] if self.dashboard_page else []
        return "\n".join([
            f"{self.site} has been down since run {self.opened_by} ({self.age_days} day(s)); run {self.run_name} "
            f"found it still down: {self.saw}.",
            f"Dashboard: {self.dashboard}",
            *page,
            f"What the nights did: {self.done}",
            "",
            "What to do now:",
            f"  {self.next_steps}",
            "",
            f"Once it is handled, the next night's check closes incident {self.incident_id}; or close it yourself: "
            f"fleet incidents close {self.incident_id} --reason '...'. This reminder comes at most once a day.",
        ])

    @property
    def file_stem(self) -> str:
        return f"still-down-{self.run_name}-{self.incident_id}"


@dataclass(frozen=True)
class NotStartedNotice:
    """A night started without a terminal (cron, a systemd timer) that stopped before its flow run existed: nobody
    reads its one line, so it reaches the operator as a failed scheduled night does."""

    command: str  # `fleet nightly`
    flow: str
    dashboard: str
    error: str  # the one line the command printed
    at: datetime

    @property
    def run_name(self) -> str:  # no flow run exists: the alert's log line names the command instead
        return f"{self.command} (not started)"

    @property
    def subject(self) -> str:
        return f"fleet-maintenance: {self.command} could not start the {self.flow} run (dashboard {self.dashboard})"

    @property
    def body(self) -> str:
        return "\n".join([
            f"{self.command}, started without a terminal at {self.at:%Y-%m-%d %H:%M:%S %Z}, stopped before its "
            f"{self.flow} run began: nothing was done tonight.",
            f"Dashboard: {self.dashboard}",
            "",
            "Error:",
            f"  {self.error}",
        ])

    @property
    def short(self) -> str:
        return short_text(f"fleet-maintenance: {self.command} could not start the {self.flow} run (dashboard "
                          f"{self.dashboard}): {self.error[:SHORT_ERROR]}", None)

    @property
    def file_stem(self) -> str:
        return f"not-started-{self.at:%Y%m%dT%H%M%S}"


Notice = Alert | ApprovalNotice | SiteDownNotice | StillDownNotice | NotStartedNotice


def alert_email(alert: Notice, settings: MailSettings) -> Outgoing:
    body = alert.body
    message = build_message(sender=settings.sender, recipients=settings.report_to, subject=alert.subject,
                            text=body, html=f"<pre>{html.escape(body)}</pre>", images={},
                            reply_to=settings.reply_to)
    return Outgoing("alert", settings.report_to, message, alert.file_stem)


async def deliver_alert(alert: Notice, settings: MailSettings, out_dir: Path, unusable: str | None = None
                        ) -> list[str]:
    """Send the alert on every channel; returns one line per channel. A channel that fails is logged, never
    raised: the alert must not hide the failure it reports. `unusable`: why the mail settings could not be used
    (the message is then written as a file, saying so)."""
    outcomes = []
    outgoing = alert_email(alert, settings)
    if settings.configured and settings.report_to:
        sent = await asyncio.to_thread(send, settings, outgoing)
        outcomes += [f"e-mail to {d.recipient}: {d.answer}" for d in sent.deliveries]
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        why = (f"the mail settings are unusable: {unusable}" if unusable else
               "no SMTP host configured (FLEET_SMTP_HOST)" if not settings.configured else "FLEET_REPORT_TO is empty")
        outcomes += [f"e-mail: {d.answer}" for d in await asyncio.to_thread(write_eml, outgoing, out_dir, why)]
    sends = [(name, "FLEET_ALERT_BLOCKS", alert.body) for name in settings.alert_blocks]
    if settings.notify_block:
        sends.append((settings.notify_block, "FLEET_NOTIFY_BLOCK", alert.short))
    for name, variable, text in sends:
        try:
            if not api_url():
                raise SettingsError(NO_SERVER)
            block = await notification_block(name, variable)
            with block.raise_on_failure():  # Apprise's blocks otherwise fail without a word
                await block.anotify(text, alert.subject)
            outcomes.append(f"block {name}: sent")
        except SettingsError as error:  # the line says which variable names a block that is not there
            outcomes.append(f"block {name}: not sent: {error}")
        except Exception as error:  # noqa: BLE001 - every channel is tried, each failure said
            outcomes.append(f"block {name}: not sent: {type(error).__name__}: {error}")
    for outcome in outcomes:
        log.warning("alert for run %s: %s", alert.run_name, outcome)
    return outcomes


NO_SERVER = ("a block lives on a Prefect server and PREFECT_API_URL is not set (a temporary server holds no saved "
             "block): set PREFECT_API_URL to the server it was saved on, as `fleet serve` needs")


def api_url() -> str | None:
    """The Prefect server's API (None: a run would start a temporary one)."""
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


async def check_alert_blocks(settings: MailSettings) -> None:
    """Every notification block the settings name (FLEET_NOTIFY_BLOCK, FLEET_ALERT_BLOCKS) is saved on the Prefect
    server, checked before the night so that its first alert does not find it missing: one line naming the
    variable (`SettingsError`). Blocks live on a server: without PREFECT_API_URL a night would start a temporary
    one (the cron line's only trace, 18 s later) that holds none of them, so that is said at once."""
    named = [(name, "FLEET_ALERT_BLOCKS") for name in settings.alert_blocks]
    if settings.notify_block:
        named.insert(0, (settings.notify_block, "FLEET_NOTIFY_BLOCK"))
    if named and not api_url():
        raise SettingsError(f"{setting_source(named[0][1])} names the Prefect block {named[0][0]!r}: {NO_SERVER}")
    for name, variable in named:
        await notification_block(name, variable)


async def notification_block(name: str, variable: str = "FLEET_NOTIFY_BLOCK") -> NotificationBlock:
    """The saved Prefect notification block `block-type-slug/name`; one line naming `variable` (and its file)
    when there is none by that name, or it cannot notify (`SettingsError`): a Slack block whose address is not a
    Slack incoming webhook sends nothing and raises nothing (Apprise knows no such address), so it is refused."""
    from prefect.blocks.core import Block
    from prefect.blocks.notifications import NotificationBlock, SlackWebhook

    try:
        block = await Block.aload(name)
    except ValueError as error:  # Prefect's "Unable to find block document named ..." and an unknown type alike
        raise SettingsError(f"{setting_source(variable)}: no saved Prefect block {name!r} ({error}); save one "
                            "in the Prefect UI (Blocks) or with the block's `.save(name)`") from None
    if not isinstance(block, NotificationBlock):
        raise SettingsError(f"{setting_source(variable)}: the block {name!r} is a {type(block).__name__}, not a "
                            "notification block")
    if isinstance(block, SlackWebhook) and not SLACK_WEBHOOK.match(block.url.get_secret_value()):
        raise SettingsError(f"{setting_source(variable)}: the block {name!r} is a Slack webhook whose address is not "
                            "Slack's (https://hooks.slack.com/services/…): it would send nothing; for a chat of your "
                            "own that takes Slack's JSON (Mattermost, Rocket.Chat) save a custom-webhook block with "
                            "json_data {\"text\": \"{{body}}\"} (docs/operations.md)")
    return block
