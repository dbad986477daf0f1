"""The reports of one run: read summary.json, render every report, deliver them, record the deliveries."""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import TypeAdapter

from fleet.model.summary import SUMMARY_FILE, Delivery, Incident, SiteAlarm, SiteLook
from fleet.rules.incidents import still_down
from reporting import charts
from reporting.aggregate import (
    NO_CLIENT,
    RunStamp,
    against_dry_run,
    build_report,
    clean,
    client_rows,
    items_frame,
    trend_frame,
)
from reporting.history import RunHead, dry_run_before, earlier_runs, read_earlier, read_head
from reporting.json_stream import ObjectStream
from reporting.looks import artifact_rows, client_looks, draw, lean, operator_looks
from reporting.mail import Outgoing, build_message, send, write_eml
from reporting.model import Chart, ReportData
from reporting.render import data_uri, render_html, render_markdown, render_text
from reporting.result import ReportResult, delivery_problems
from reporting.rows import ReportSummary, SiteRow, read_dry_run, read_summary
from reporting.settings import MailSettings
from reporting.vulnerability_section import vulnerability_rows

log = logging.getLogger(__name__)

OPERATOR = "operator"
BY_TYPE_CHART = "outcomes-by-type"
REPORT_DIR = "report"
FORMATS = (".html", ".txt", ".md")
DELIVERIES = TypeAdapter(list[Delivery])
NO_ROWS = np.array([], dtype=np.intp)
_FULL_SIZE_LINK = re.compile(r"<a\b[^>]*\bdata-full-size\b[^>]*>(.*?)</a>", re.S)
_ADDRESS = re.compile(r"^[^@\s<>,;\"]+@[^@\s<>,;\"]+\.[^@\s<>,;\"]+$")


class ClientChoiceError(ValueError):
    """`--client` names no client report of the run, or the run is a dry run (never sent to clients)."""


def report_recipients(rendered: RenderedRun, report: RenderedReport) -> list[str]:
    """The client's own addresses, as rendered (before a hold readdressed the report)."""
    return next((r.recipients for r in rendered.reports if r.name == report.name), [])


@dataclass(frozen=True)
class RenderedReport:
    """One report as written under RUN_DIR/report/: what delivery needs to build its message from the files."""

    name: str  # OPERATOR or the client's name as in summary.json
    subject: str
    recipients: list[str]
    file_stem: str
    charts: tuple[str, ...]  # Content-IDs; each chart is the file `<file_stem>-<cid>.png`
    held: str | None = None  # why the automatic e-mail to this client waits for the operator's review
    pictures: tuple[str, ...] = ()  # Content-IDs; each screenshot picture is the file `<file_stem>-<cid>.jpg`
    reply_to: str | None = None  # the client's own Reply-To (the policy's `reply_to`); FLEET_REPLY_TO otherwise

    def file(self, report_dir: Path, suffix: str) -> Path:
        return report_dir / f"{self.file_stem}{suffix}"


@dataclass(frozen=True)
class RenderedRun:
    """A run's reports, by name and file only: the bodies stay on disk until each message is built."""

    run_dir: Path
    run_id: str
    dry_run: bool
    reports: list[RenderedReport]
    broken: list[SiteAlarm] = field(default_factory=list)
    still_down: list[Incident] = field(default_factory=list)  # open incidents of earlier nights, their site down
    did_nothing: str | None = None
    visual: list[dict[str, str]] = field(default_factory=list)  # the visual results, a row per page (the artifact)
    visual_note: str = ""  # the visual checks in one sentence
    dashboard: str = ""  # the dashboard's URL as summary.json says it (the delivery event names it)

    @property
    def operator(self) -> RenderedReport:
        return self.reports[0]

    def path(self, report: RenderedReport, suffix: str) -> Path:
        return report.file(self.run_dir / REPORT_DIR, suffix)

    def chart_path(self, report: RenderedReport, cid: str) -> Path:
        return self.path(report, chart_suffix(cid))

    def picture_path(self, report: RenderedReport, cid: str) -> Path:
        return self.path(report, picture_suffix(cid))

    @property
    def files(self) -> list[Path]:
        return [
            path
            for report in self.reports
            for path in (*(self.path(report, suffix) for suffix in FORMATS),
                         *(self.chart_path(report, cid) for cid in report.charts),
                         *(self.picture_path(report, cid) for cid in report.pictures))
        ]  # fmt: skip


def report_result(rendered: RenderedRun, deliveries: list[Delivery]) -> ReportResult:
    """What the reports of `rendered` came to, once delivered (or not)."""
    return ReportResult(
        run_id=rendered.run_id,
        run_dir=rendered.run_dir,
        reports=[report.name for report in rendered.reports],
        files=rendered.files + sorted({Path(d.eml_path) for d in deliveries if d.eml_path}),
        deliveries=deliveries,
        problems=delivery_problems(deliveries),
        broken=rendered.broken,
        did_nothing=rendered.did_nothing,
        still_down=rendered.still_down,
    )


def chart_suffix(cid: str) -> str:
    return f"-{cid}.png"


def picture_suffix(cid: str) -> str:
    return f"-{cid}.jpg"


def file_stem(client: str | None) -> str:
    """A safe, unique file name for a report: client names are untrusted and may collide once slugged."""
    if client is None:
        return OPERATOR
    slug = re.sub(r"[^a-z0-9]+", "-", client.casefold()).strip("-")[:40] or "client"
    return f"client-{slug}-{hashlib.sha256(client.encode()).hexdigest()[:6]}"


def client_recipients(summary: ReportSummary) -> dict[str, list[str]]:
    """Every client with a site or an item in this run, and its report addresses (policy beats dashboard)."""
    addresses = {c.name: c.recipients or ([c.email] if c.email else []) for c in summary.clients}
    present = {s.client for s in summary.sites} | {i.client for i in summary.items}
    names = sorted((present - {None, NO_CLIENT}), key=str.casefold)
    return {name: list(dict.fromkeys(a.strip() for a in addresses.get(name, []) if a.strip())) for name in names}


def _earlier(run_dir: Path, head: RunHead, trend_runs: int) -> list[tuple[RunStamp, pd.DataFrame]]:
    """The earlier runs of the trend window, each read alone and kept only as a small frame."""
    window = []
    for path in earlier_runs(run_dir, head, trend_runs):
        past = read_earlier(path)
        if past is not None:
            window.append((past.model_copy(update={"items": []}), trend_frame(past.items)))
    return window


class RunWindow:
    """This run and its trend window, read once and held lean (frames, rows) for every audience's report."""

    def __init__(self, run_dir: Path, trend_runs: int) -> None:
        self.run_dir = run_dir
        head = read_head(run_dir)
        self.history = _earlier(run_dir, head, trend_runs)  # before this run: one summary at a time
        self.dry_run = dry_run_before(run_dir, head)  # the rehearsal of this night, if there was one
        self.summary = read_summary(run_dir, lean)
        self.audiences: list[tuple[str | None, list[str]]] = [(None, []), *client_recipients(self.summary).items()]
        self.reply_to = {client.name: client.reply_to for client in self.summary.clients if client.reply_to}
        self.history.append((self.summary, items_frame(self.summary.items)))
        self.vulnerability_items = vulnerability_rows(self.summary.items)  # the few the vulnerability section lists
        self.summary.items = []  # in the frame now
        self.client_rows = [client_rows(frame) for _, frame in self.history]
        self.sites: dict[str, list[SiteRow]] = {}
        for site in self.summary.sites:
            self.sites.setdefault(site.client or NO_CLIENT, []).append(site)
        self.looks: dict[str, list[SiteLook]] = {}
        for look in self.summary.looks:
            self.looks.setdefault(look.client or NO_CLIENT, []).append(look)

    def report(self, client: str | None, max_rows: int) -> ReportData:
        if client is None:
            data = build_report(self.summary, self.history, self.summary.sites, max_rows=max_rows,
                                vulnerability_items=self.vulnerability_items)
            data.looks = operator_looks(self.summary.looks, [alarm.site_id for alarm in data.broken.shown])
            for alarm in data.broken.shown:  # a folded alarm is one line: its look is the looks' own
                alarm.look = data.looks.site(alarm.site_id)
            if self.dry_run is not None:
                data.against_dry_run = against_dry_run(read_dry_run(self.dry_run), self.history[-1][1])
            return data
        window = [
            (run, frame.take(rows.get(client, NO_ROWS)))
            for (run, frame), rows in zip(self.history, self.client_rows, strict=True)
        ]
        data = build_report(self.summary, window, self.sites.get(client, []), client=client, max_rows=max_rows,
                            vulnerability_items=self.vulnerability_items)
        data.looks = client_looks(self.looks.get(client, []))
        return data


def _charts(data: ReportData) -> list[Chart]:
    if not data.trends:  # the first night: no trend yet, so this night's outcomes by type
        if not any(row.total for row in data.by_type):
            return []
        return [Chart(BY_TYPE_CHART, "This night's outcomes by type", charts.outcomes_by_type(data.by_type,
                                                                                             data.voice))]
    drawn = [Chart("outcomes-per-night", "Outcomes per night", charts.outcomes_per_night(data.trends, data.voice))]
    if data.plugin_trend:
        drawn.append(Chart("plugin-failure-rate", "Failure rate per plugin over the whole fleet, these nights",
                           charts.failure_rate_per_plugin(data.plugin_trend)))
    return drawn


def _write_report(
    run_dir: Path, client: str | None, recipients: list[str], data: ReportData, held: str | None = None,
    reply_to: str | None = None,
) -> RenderedReport:
    """Draw the charts and the screenshots' pictures, and write every file of one report; only its name and
    file names are kept."""
    out = run_dir / REPORT_DIR
    data.charts = _charts(data)
    pictures = draw(data.looks, run_dir)
    report = RenderedReport(
        name=client if client is not None else OPERATOR,
        subject=clean(data.subject, 200),
        recipients=recipients,
        file_stem=file_stem(client),
        charts=tuple(chart.cid for chart in data.charts),
        held=held,
        pictures=tuple(picture.cid for picture in pictures),
        reply_to=reply_to,
    )
    for chart in data.charts:
        report.file(out, chart_suffix(chart.cid)).write_bytes(chart.png)
    for picture in pictures:
        report.file(out, picture_suffix(picture.cid)).write_bytes(picture.jpeg)
    for suffix, render in zip(FORMATS, (render_html, render_text, render_markdown), strict=True):
        report.file(out, suffix).write_text(render(data), encoding="utf-8")
    return report


def render_reports(run_dir: Path, *, trend_runs: int = 14, max_rows: int = 100,
                   mail: MailSettings | None = None) -> RenderedRun:
    """Render the operator's report and one per client, and write them under RUN_DIR/report/.

    A client's report promises an answer to a reply only when one reaches someone: its own `reply_to` (the
    policy's), or with the `mail` settings it is sent with, FLEET_REPLY_TO or FLEET_MAIL_FROM.
    One report at a time, each written and let go before the next, so memory does not grow with the clients.
    """
    run_dir = Path(run_dir)
    if not (run_dir / SUMMARY_FILE).is_file():
        raise FileNotFoundError(f"no {SUMMARY_FILE} in {run_dir}")
    run = RunWindow(run_dir, trend_runs)
    out = run_dir / REPORT_DIR
    out.mkdir(exist_ok=True)
    held = {client.name: client.held_for_review for client in run.summary.clients if client.held_for_review}
    reports = []
    for client, recipients in run.audiences:
        data = run.report(client, max_rows)
        own = run.reply_to.get(client or "")
        if client is not None:
            data.reply_to = mail.replies_to(own) if mail is not None else own
        reports.append(_write_report(run_dir, client, recipients, data, held.get(client or ""), own))
    return RenderedRun(run_dir, run.summary.run_id, run.summary.dry_run, reports, run.summary.broken,
                       [] if run.summary.dry_run else still_down(run.summary.incidents, run.summary.run_id),
                       run.summary.did_nothing, artifact_rows(run.summary.looks),
                       operator_looks(run.summary.looks, []).sentence, run.summary.dashboard or "")


def _outgoing(rendered: RenderedRun, report: RenderedReport, recipients: list[str], settings: MailSettings) -> Outgoing:
    """The message, built from the report's files: the HTML file's inline images become Content-ID parts."""
    html = rendered.path(report, ".html").read_text(encoding="utf-8")
    images = {}
    for cid in report.charts:
        images[cid] = rendered.chart_path(report, cid).read_bytes()
        html = html.replace(data_uri(images[cid]), f"cid:{cid}")
    for cid in report.pictures:  # a picture equal to an earlier one (a page that did not change) is sent once
        picture = rendered.picture_path(report, cid).read_bytes()
        if data_uri(picture) in html:
            images[cid] = picture
            html = html.replace(data_uri(picture), f"cid:{cid}")
    html = _FULL_SIZE_LINK.sub(r"\1", html)  # the full-size screenshots are files on the operator's disk
    message = build_message(
        sender=settings.sender,
        recipients=recipients,
        subject=report.subject,
        text=rendered.path(report, ".txt").read_text(encoding="utf-8"),
        html=html,
        images=images,
        reply_to=report.reply_to or settings.reply_to,
    )
    return Outgoing(report.name, recipients, message, report.file_stem)


def held_for_review(rendered: RenderedRun, report: RenderedReport, settings: MailSettings) -> RenderedReport:
    """A client's report held back: addressed to the operator instead, its subject marked for review."""
    command = f"fleet report {rendered.run_dir} --send --client {report.name!r}"
    return RenderedReport(name=report.name, subject=f"[held for review] {report.subject}",
                          recipients=settings.report_to, file_stem=report.file_stem, charts=report.charts,
                          pictures=report.pictures,  # the operator's to answer: FLEET_REPLY_TO, not the client's
                          held=f"held for review ({report.held}); send it to the client with: {command}")


def deliver_reports(
    rendered: RenderedRun, settings: MailSettings, *, clients: list[str] | None = None
) -> list[Delivery]:
    """Send every report over SMTP (or write `.eml` files without SMTP settings) and record it in summary.json.

    Each message is built from the files when its turn comes and let go once sent. A client without a valid
    address gets a `.eml` file to forward by hand instead of a message. Clients are not mailed about dry runs:
    those reports stay in RUN_DIR/report/ for the operator. A client whose site the night broke is held for
    review: its report goes to the operator, marked so. `clients` sends only those clients' reports, held
    or not (the operator's release).
    """
    deliveries: list[Delivery] = []
    attempts = settings.smtp_attempts  # down to one try per message once the server proved unreachable
    for report in rendered.reports:
        if clients is not None:
            if report.name not in clients:
                continue
            report = replace(report, held=None)
        elif rendered.dry_run and report.name != OPERATOR:
            continue
        if report.held:
            report = held_for_review(rendered, report, settings)
            deliveries.append(Delivery(report=report.name, accepted=False, held=True, answer=report.held,
                                       recipient=clean(", ".join(report_recipients(rendered, report)), 200)))
        wanted = settings.report_to if report.name == OPERATOR or report.held else report.recipients
        recipients = [r for r in wanted if _ADDRESS.match(r)]
        deliveries += [
            Delivery(report=report.name, recipient=clean(r, 200), accepted=False, answer="not sent: invalid address")
            for r in wanted
            if r not in recipients
        ]
        outgoing = _outgoing(rendered, report, recipients, settings)
        if not settings.configured:
            deliveries += write_eml(outgoing, rendered.run_dir, "no SMTP host configured (FLEET_SMTP_HOST)")
        elif recipients:
            sent = send(settings, outgoing, attempts=attempts)
            deliveries += sent.deliveries
            attempts = 1 if sent.unreachable else settings.smtp_attempts
        elif report.name == OPERATOR or report.held:
            deliveries.append(
                Delivery(report=OPERATOR, recipient="", accepted=False, answer="not sent: FLEET_REPORT_TO is empty")
            )
        else:
            deliveries += write_eml(outgoing, rendered.run_dir, "the client has no valid e-mail address")
    record_deliveries(rendered.run_dir, deliveries)
    return deliveries


def record_deliveries(run_dir: Path, deliveries: list[Delivery]) -> None:
    """Append to the summary on disk (re-read, so nothing written since the render is lost).

    The file is copied member by member with only `deliveries` rewritten, in Summary.write's layout: a large
    fleet's summary is never held whole.
    """
    path = run_dir / SUMMARY_FILE
    tmp = path.with_suffix(".json.tmp")
    found = False

    def appended(earlier: Any) -> str:
        nonlocal found
        found = True
        text = DELIVERIES.dump_json([*DELIVERIES.validate_python(earlier), *deliveries], indent=2).decode()
        return text.replace("\n", "\n  ")  # a member of the top-level object: one level deeper

    try:
        with path.open("rb") as source, tmp.open("w", encoding="utf-8", newline="") as target:
            stream = ObjectStream(source, echo=target)
            for key in stream.members(append=lambda: "" if found else f',\n  "deliveries": {appended([])}\n'):
                if key == "deliveries":
                    stream.replace(appended)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)


def render_run(
    run_dir: Path, *, send: bool, settings: MailSettings | None = None, trend_runs: int = 14,
    clients: list[str] | None = None,
) -> ReportResult:
    """Render (and with `send`, deliver) the reports of one run; the single entry point for flows and the CLI.

    `settings` default to the FLEET_* environment when sending.

    With `clients`, only those clients' reports are sent (held for review or not). Delivery failures are
    returned in `problems` (and recorded in summary.json); call `result.raise_for_problems()` to fail the caller.
    """
    if send and settings is None:
        settings = MailSettings()
    rendered = render_reports(Path(run_dir), trend_runs=trend_runs, mail=settings if send else None)
    if clients is not None:
        if rendered.dry_run:
            raise ClientChoiceError(f"run {rendered.run_id} is a dry run: its reports are never sent to clients")
        unknown = [name for name in clients if name not in {report.name for report in rendered.reports[1:]}]
        if unknown:
            raise ClientChoiceError(f"run {rendered.run_id} has no report for client {', '.join(map(repr, unknown))}")
    deliveries = deliver_reports(rendered, settings, clients=clients) if send else []
    result = report_result(rendered, deliveries)
    for problem in result.problems:
        log.error("%s", problem)
    return result
