"""The operator's alerts: a night that failed, a site a night broke, or a night waiting at its approval gate. A
short message by e-mail (or `.eml`), through the Prefect notification blocks named in FLEET_ALERT_BLOCKS (the same
message), and as one short text with its link through the block named in FLEET_NOTIFY_BLOCK (chat, a pager: where
operators look). One break is one message, sent when it is found; the failed night's message names only the
breaks not sent before. Every text names the dashboard one way (`dashboard_name`) and links the run one way
(`run_link`), and a text too long for its channel is shortened at a word, with the link to the rest."""

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
from fleet.model.summary import Containment, ContainmentStatus
from fleet.model.vocabulary import AWAITING_APPROVAL, count
from fleet.model.vulnerability import VulnerabilityNews
from reporting.mail import Outgoing, build_message, send, write_eml
from reporting.settings import MailSettings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from prefect.blocks.notifications import NotificationBlock

    from fleet.rules.plan import PlanItem

log = logging.getLogger(__name__)
SLACK_WEBHOOK = re.compile(r"^https://hooks\.slack(-gov)?\.com/services/[A-Z0-9]+/[A-Z0-9]+/[A-Z0-9]+/?$", re.I)
ERROR_LINES = 8
SHORT_LIMIT = 2_000  # characters of a short text where the channel takes more: one break's message is whole
# the longest text each channel takes (Opsgenie's message 130, PagerDuty's summary 1,024, Discord 2,000, an SMS
# of ten parts); the others take far more than a short text needs
CHANNEL_LIMITS = {"opsgenie-webhook": 130, "twilio-sms": 1_530, "pager-duty-webhook": 1_024, "discord-webhook": 2_000}
REST = " … the rest: "


def fit(line: str, limit: int, link: str | None) -> str:
    """`line`, then `link`, in at most `limit` characters: a line too long is cut after its last whole word that
    fits and says where the rest is (the link); never mid-word, never without the link."""
    whole = f"{line} {link}" if link else line
    if len(whole) <= limit:
        return whole
    tail = f"{REST}{link}" if link else " …"
    room = max(limit - len(tail), 0)
    cut = line[:room + 1]
    words = cut[:cut.rfind(" ")] if " " in cut else ""  # the last space that leaves a whole word before it
    return words.rstrip(" ,;:") + tail


def dashboard_name(url: str | None) -> str:
    """The dashboard as every message names it: its host and port (`dash.example.com`, `127.0.0.1:8080`), never a
    URL's user, password or path."""
    from urllib.parse import urlsplit

    parts = urlsplit((url or "").strip())
    if not parts.hostname:
        return "(FLEET_BASE_URL not set)"
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


def run_link(flow_run_id: str | None) -> str | None:
    """A flow run's page in the Prefect UI, in the one form every message uses (the automations' too: Prefect's
    `ui_url`), or None without a run or a UI URL."""
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value()
    return f"{ui.rstrip('/')}/runs/flow-run/{flow_run_id}" if ui and flow_run_id else None


def short_text(line: str, link: str | None) -> str:
    """One short text for a chat or a pager: what happened, then where to look."""
    return fit(line, SHORT_LIMIT, link)


class ShortText:
    """A notice's one short text for a chat or a pager: its `line`, then its `link`, at the default length (each
    channel's own: `fit` with `channel_limit`)."""

    line: str
    link: str | None

    @property
    def short(self) -> str:
        return short_text(self.line, self.link)


@dataclass(frozen=True)
class Alert(ShortText):
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
    def line(self) -> str:
        first = self.first_lines[0] if self.first_lines else self.state
        return (f"fleet-maintenance: the {self.flow} run {self.run_name} ended {self.state} "
                f"(dashboard {self.dashboard}): {first}")

    @property
    def link(self) -> str | None:
        return self.ui_url


    @property
    def file_stem(self) -> str:
        return f"alert-{self.run_id}"


@dataclass(frozen=True)
class ApprovalNotice(ShortText):
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
        return (f"fleet-maintenance: {count(len(self.items), 'update')} {AWAITING_APPROVAL.word} (dashboard "
                f"{self.dashboard}, run {self.run_name})")

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
    def line(self) -> str:
        return (f"fleet-maintenance: {count(len(self.items), 'update')} {AWAITING_APPROVAL.word} until {self.until}: "
                f"waiting for your approval (dashboard {self.dashboard}, run {self.run_name})")

    @property
    def link(self) -> str | None:
        return self.ui_url


    @property
    def file_stem(self) -> str:
        return f"approval-{self.run_id}"


@dataclass(frozen=True)
class BreakNotice(ShortText):
    """One site a night broke, sent the moment the night knows what it did about it: the site, the release, what the
    night did, what to do, and the run's link. The night's failed message does not say it again."""

    run_name: str  # the night's run id
    dashboard: str  # `dashboard_name`
    site_id: int
    site: str  # name and address
    step: str
    release: str  # "Forms 1.3 → 1.4", or the suspects
    did: str  # what the night did about it
    saw: str
    next_steps: str
    down: bool = False  # its MainWP Child no longer answers: only someone on the server can help
    dashboard_page: str | None = None
    run_url: str | None = None  # the flow run in the Prefect UI

    @classmethod
    def of(cls, containment: Containment, *, run_name: str, dashboard: str, site_id: int, site: str, release: str,
           dashboard_page: str | None, run_url: str | None) -> BreakNotice:
        return cls(run_name=run_name, dashboard=dashboard, site_id=site_id, site=site, step=containment.step.value,
                   release=release, did=night_did(containment), saw=containment.saw,
                   next_steps=containment.next_steps, down=containment.status is ContainmentStatus.unreachable,
                   dashboard_page=dashboard_page, run_url=run_url)

    @property
    def state(self) -> str:
        return "is down, unreachable by the dashboard" if self.down else "broke"

    @property
    def subject(self) -> str:
        return f"fleet-maintenance: {self.site} {self.state} after {self.release} (run {self.run_name})"

    @property
    def line(self) -> str:
        return (f"fleet-maintenance: {self.site} {self.state} after the {self.step} updates of run {self.run_name} "
                f"(dashboard {self.dashboard}): {self.release}. The night {self.did}. To do: {self.next_steps}")

    @property
    def link(self) -> str | None:
        return self.run_url or self.dashboard_page


    @property
    def body(self) -> str:
        page = [f"Its page on the dashboard: {self.dashboard_page}"] if self.dashboard_page else []
        run = [f"The run in Prefect: {self.run_url}"] if self.run_url else []
        return "\n".join([
            f"The {self.step} updates of run {self.run_name} left {self.site} broken: {self.release}.",
            f"What the check saw: {self.saw}" if self.saw else "",
            f"What the night did: it {self.did}.",
            f"Dashboard: {self.dashboard}",
            *page,
            *run,
            "",
            "What to do now:",
            f"  {self.next_steps}",
        ]).replace("\n\n\n", "\n\n")

    @property
    def file_stem(self) -> str:
        return f"break-{self.run_name}-{self.site_id}"


def release_of(containment: Containment, applied: Sequence[PlanItem]) -> str:
    """The release that broke the site ("Forms 1.3 → 1.4"), or the step's releases when its culprit is not known."""
    culprit = containment.culprit
    if culprit is not None:
        return f"{culprit.name or culprit.slug} {culprit.from_version or '?'} → {culprit.to_version or '?'}"
    named = [f"{item.name or item.slug} {item.from_version or '?'} → {item.to_version or '?'}" for item in applied]
    if not named:
        return f"the {containment.step.value} updates"
    return ("one of " if len(named) > 1 else "") + ", ".join(named)


def night_did(containment: Containment) -> str:
    """What the night did about a break, after "The night ": always that the site gets nothing more tonight and
    the versions go nowhere else."""
    culprit = containment.culprit
    name = (culprit.name or culprit.slug) if culprit is not None else ""
    held = "sent the site nothing more and holds the release fleet-wide"
    if containment.never_ran:
        return f"left {name} deactivated (switching it on failed, so it never ran); it {held}"
    if containment.status is ContainmentStatus.contained:
        return f"deactivated {name}, and the site passes its check again; it {held}"
    if containment.status is ContainmentStatus.revived:
        return (f"revived it through its Fleet Guard: {name} switched off and the version before it put back, and "
                f"the site passes its check again; it {held}")
    held = held.replace("release", "releases")
    if containment.status is ContainmentStatus.unreachable:
        _, _, why = containment.detail.partition("the night cannot revive it: ")
        beyond = f" and the night cannot revive it ({why.rstrip('.')})" if why else ""
        return f"could switch nothing off: the site's MainWP Child does not answer{beyond}; it {held}"
    if containment.status is ContainmentStatus.not_contained:
        return (f"deactivated the updated plugins one half at a time without bringing the site back, and switched "
                f"them on again; it {held}")
    return f"left the site as it is ({containment.detail}); it {held}"


@dataclass(frozen=True)
class StillDownNotice(ShortText):
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
    def line(self) -> str:
        return (f"fleet-maintenance: {self.site} is still down, {count(self.age_days, 'day')} after run "
                f"{self.opened_by} (incident {self.incident_id}, dashboard {self.dashboard}). To do: {self.next_steps}")

    @property
    def link(self) -> str | None:
        return self.run_url or self.dashboard_page


    @property
    def subject(self) -> str:
        return (f"fleet-maintenance: {self.site} is still down, {count(self.age_days, 'day')} after run "
                f"{self.opened_by} (incident {self.incident_id})")

    @property
    def body(self) -> str:
        page = [f"Its page on the dashboard: {self.dashboard_page}"] if self.dashboard_page else []
        return "\n".join([
            f"{self.site} has been down since run {self.opened_by} ({count(self.age_days, 'day')}); run "
            f"{self.run_name} found it still down: {self.saw}.",
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
class NotStartedNotice(ShortText):
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
    def line(self) -> str:
        return f"fleet-maintenance: {self.command} could not start the {self.flow} run (dashboard {self.dashboard}): " \
               f"{self.error}"

    @property
    def link(self) -> str | None:
        return None


    @property
    def file_stem(self) -> str:
        return f"not-started-{self.at:%Y%m%dT%H%M%S}"


@dataclass(frozen=True)
class VulnerabilityNotice(ShortText):
    """A vulnerability at or above the policy's threshold the operator hears of once: new tonight with no fix yet, or
    its fix first offered tonight and not installed (the site stays vulnerable)."""

    run_name: str
    dashboard: str
    news: VulnerabilityNews
    run_url: str | None = None

    @property
    def what(self) -> str:
        news = self.news
        item = f"{news.name or news.slug} ({news.type})"
        if news.kind == "no_fix":
            return f"a known vulnerability with no fix yet, {news.vulnerability.label}, in {item} {news.release}"
        return f"a security fix not installed, {item} {news.release} (fixes {news.vulnerability.label})"

    @property
    def next_steps(self) -> str:
        if self.news.kind == "no_fix":
            return ("the nights install its fix the night one is offered; until then consider deactivating or "
                    "replacing it where the site can do without it")
        return "see why on each site; release a hold or fix the site so that the next night installs it"

    @property
    def subject(self) -> str:
        return f"fleet-maintenance: {self.what} on {count(len(self.news.sites), 'site')} (run {self.run_name})"

    @property
    def line(self) -> str:
        shown = "; ".join(self.news.sites[:5]) + (f" and {len(self.news.sites) - 5} more" if len(self.news.sites) > 5
                                                 else "")
        return (f"fleet-maintenance: {self.what}, on {count(len(self.news.sites), 'site')} (dashboard "
                f"{self.dashboard}): {shown}. To do: {self.next_steps}")

    @property
    def link(self) -> str | None:
        return self.run_url


    @property
    def body(self) -> str:
        title = self.news.vulnerability.title
        run = [f"The run in Prefect: {self.run_url}"] if self.run_url else []
        return "\n".join([
            f"Run {self.run_name} found {self.what}" + (f": {title}" if title else "") + ".",
            f"Published: {self.news.vulnerability.published or 'unknown'}",
            f"Dashboard: {self.dashboard}",
            *run,
            "",
            f"On {count(len(self.news.sites), 'site')}:",
            *(f"  {site}" for site in self.news.sites),
            "",
            f"What to do now: {self.next_steps}. You hear of it once; the reports list it every night.",
        ])

    @property
    def file_stem(self) -> str:
        return f"security-{self.run_name}-{self.news.kind}-{re.sub(r'[^A-Za-z0-9.-]', '-', self.news.vulnerability.id)}"


Notice = Alert | ApprovalNotice | BreakNotice | StillDownNotice | NotStartedNotice | VulnerabilityNotice


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
    sends = [(name, "FLEET_ALERT_BLOCKS", None) for name in settings.alert_blocks]
    if settings.notify_block:
        sends.append((settings.notify_block, "FLEET_NOTIFY_BLOCK", alert))
    for name, variable, short in sends:
        try:
            if not api_url():
                raise SettingsError(NO_SERVER)
            block = await notification_block(name, variable)
            text = alert.body if short is None else fit(short.line, channel_limit(name), short.link)
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


def channel_limit(block: str) -> int:
    """The longest short text the block `block-type-slug/name` gets."""
    return min(SHORT_LIMIT, CHANNEL_LIMITS.get(block.partition("/")[0], SHORT_LIMIT))


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
