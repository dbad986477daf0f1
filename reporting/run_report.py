"""The reports of one run: read summary.json, render every report, deliver them, record the deliveries."""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from fleet.summary import SUMMARY_FILE, Delivery, Summary
from reporting import charts
from reporting.aggregate import NO_CLIENT, build_report, clean, items_frame, split_by_client
from reporting.history import earlier_runs, read_earlier
from reporting.mail import Outgoing, build_message, send, write_eml
from reporting.model import Chart, ReportData
from reporting.render import data_source, render_html, render_markdown, render_text
from reporting.settings import MailSettings

log = logging.getLogger(__name__)

OPERATOR = "operator"
REPORT_DIR = "report"
_ADDRESS = re.compile(r"^[^@\s<>,;\"]+@[^@\s<>,;\"]+\.[^@\s<>,;\"]+$")


class ReportDeliveryError(RuntimeError):
    """At least one report did not reach a recipient; the message names which and why."""


class ReportResult(BaseModel):
    """What a report run produced: the files written, the deliveries made, and what went wrong."""

    run_id: str
    run_dir: Path
    reports: list[str] = Field(description="'operator' and the client names, in render order.")
    files: list[Path] = Field(default_factory=list)
    deliveries: list[Delivery] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @classmethod
    def of(cls, rendered: RenderedRun, deliveries: list[Delivery]) -> ReportResult:
        return cls(
            run_id=rendered.summary.run_id,
            run_dir=rendered.run_dir,
            reports=[report.name for report in rendered.reports],
            files=rendered.files + sorted({Path(d.eml_path) for d in deliveries if d.eml_path}),
            deliveries=deliveries,
            problems=delivery_problems(deliveries),
        )

    def raise_for_problems(self) -> None:
        if self.problems:
            raise ReportDeliveryError(f"run {self.run_id}: " + "; ".join(self.problems))


@dataclass
class RenderedReport:
    name: str  # OPERATOR or the client's name as in summary.json
    data: ReportData
    html: str  # images by Content-ID, for the e-mail
    text: str
    markdown: str  # images inline as data URIs, for the Prefect artifact
    recipients: list[str]
    file_stem: str


@dataclass
class RenderedRun:
    run_dir: Path
    summary: Summary
    reports: list[RenderedReport]
    files: list[Path]

    @property
    def operator(self) -> RenderedReport:
        return self.reports[0]


def file_stem(client: str | None) -> str:
    """A safe, unique file name for a report: client names are untrusted and may collide once slugged."""
    if client is None:
        return OPERATOR
    slug = re.sub(r"[^a-z0-9]+", "-", client.casefold()).strip("-")[:40] or "client"
    return f"client-{slug}-{hashlib.sha256(client.encode()).hexdigest()[:6]}"


def client_recipients(summary: Summary) -> dict[str, list[str]]:
    """Every client with a site or an item in this run, and its report addresses (policy beats dashboard)."""
    addresses = {c.name: c.recipients or ([c.email] if c.email else []) for c in summary.clients}
    present = {s.client for s in summary.sites} | {i.client for i in summary.items}
    names = sorted((present - {None, NO_CLIENT}), key=str.casefold)
    return {name: list(dict.fromkeys(a.strip() for a in addresses.get(name, []) if a.strip())) for name in names}


def _charts(data: ReportData) -> list[Chart]:
    if not data.trends:
        return []
    drawn = [Chart("outcomes-per-night", "Outcomes per night", charts.outcomes_per_night(data.trends))]
    if data.plugin_trend:
        drawn.append(
            Chart("plugin-failure-rate", "Failure rate per plugin", charts.failure_rate_per_plugin(data.plugin_trend))
        )
    return drawn


def render_reports(run_dir: Path, *, trend_runs: int = 14, max_rows: int = 100) -> RenderedRun:
    """Render the operator's report and one per client, and write them under RUN_DIR/report/."""
    if not (run_dir / SUMMARY_FILE).is_file():
        raise FileNotFoundError(f"no {SUMMARY_FILE} in {run_dir}")
    summary = Summary.read(run_dir)
    history = []
    for path in earlier_runs(run_dir, summary, trend_runs):  # one at a time: a large fleet's summary is big
        past = read_earlier(path)
        if past is not None:
            history.append((past.model_copy(update={"items": [], "sites": []}), items_frame(past)))
    history.append((summary, items_frame(summary)))
    by_client = [(past, split_by_client(frame)) for past, frame in history]
    out = run_dir / REPORT_DIR
    out.mkdir(exist_ok=True)
    audiences: list[tuple[str | None, list[str]]] = [(None, [])]
    audiences += list(client_recipients(summary).items())
    reports, files = [], []
    for client, recipients in audiences:
        window = history if client is None else [
            (past, groups.get(client, history[-1][1].iloc[0:0])) for past, groups in by_client
        ]
        data = build_report(summary, window, client=client, max_rows=max_rows)
        data.charts = _charts(data)
        report = RenderedReport(
            name=client if client is not None else OPERATOR,
            data=data,
            html=render_html(data),
            text=render_text(data),
            markdown=render_markdown(data),
            recipients=recipients,
            file_stem=file_stem(client),
        )
        for suffix, content in (
            (".html", render_html(data, data_source)),
            (".txt", report.text),
            (".md", report.markdown),
        ):
            path = out / f"{report.file_stem}{suffix}"
            path.write_text(content, encoding="utf-8")
            files.append(path)
        reports.append(report)
    return RenderedRun(run_dir, summary, reports, files)


def _outgoing(report: RenderedReport, recipients: list[str], settings: MailSettings) -> Outgoing:
    message = build_message(
        sender=settings.mail_from,
        recipients=recipients,
        subject=clean(report.data.subject, 200),
        text=report.text,
        html=report.html,
        images={chart.cid: chart.png for chart in report.data.charts},
    )
    return Outgoing(report.name, recipients, message, report.file_stem)


def deliver_reports(rendered: RenderedRun, settings: MailSettings) -> list[Delivery]:
    """Send every report over SMTP (or write `.eml` files without SMTP settings) and record it in summary.json.

    A client without a valid address gets a `.eml` file to forward by hand instead of a message. Clients are
    not mailed about dry runs: those reports stay in RUN_DIR/report/ for the operator.
    """
    deliveries: list[Delivery] = []
    attempts = settings.smtp_attempts  # down to one try per message once the server proved unreachable
    for report in rendered.reports:
        if rendered.summary.dry_run and report.name != OPERATOR:
            continue
        wanted = settings.report_to if report.name == OPERATOR else report.recipients
        recipients = [r for r in wanted if _ADDRESS.match(r)]
        deliveries += [
            Delivery(report=report.name, recipient=clean(r, 200), accepted=False, answer="not sent: invalid address")
            for r in wanted
            if r not in recipients
        ]
        outgoing = _outgoing(report, recipients, settings)
        if not settings.configured:
            deliveries += write_eml(outgoing, rendered.run_dir, "no SMTP host configured (FLEET_SMTP_HOST)")
        elif recipients:
            sent = send(settings, outgoing, attempts=attempts)
            deliveries += sent.deliveries
            attempts = 1 if sent.unreachable else settings.smtp_attempts
        elif report.name == OPERATOR:
            deliveries.append(
                Delivery(report=OPERATOR, recipient="", accepted=False, answer="not sent: FLEET_REPORT_TO is empty")
            )
        else:
            deliveries += write_eml(outgoing, rendered.run_dir, "the client has no valid e-mail address")
    record_deliveries(rendered.run_dir, deliveries)
    return deliveries


def record_deliveries(run_dir: Path, deliveries: list[Delivery]) -> None:
    """Append to the summary on disk (re-read, so nothing written since the render is lost)."""
    summary = Summary.read(run_dir)
    summary.deliveries = [*summary.deliveries, *deliveries]
    summary.write(run_dir)


def delivery_problems(deliveries: list[Delivery]) -> list[str]:
    """Every recipient a report should have reached and did not (a `.eml` fallback is not a failure)."""
    return [
        f"{d.report} report to {d.recipient or '(nobody)'} not delivered: {d.answer}"
        for d in deliveries
        if not d.accepted and d.eml_path is None
    ]


def render_run(
    run_dir: Path, *, send: bool, settings: MailSettings | None = None, trend_runs: int = 14
) -> ReportResult:
    """Render (and with `send`, deliver) the reports of one run; the single entry point for flows and the CLI.

    Delivery failures are returned in `problems` (and recorded in summary.json); call
    `result.raise_for_problems()` to fail the caller.
    """
    rendered = render_reports(Path(run_dir), trend_runs=trend_runs)
    deliveries = deliver_reports(rendered, settings or MailSettings()) if send else []
    result = ReportResult.of(rendered, deliveries)
    for problem in result.problems:
        log.error("%s", problem)
    return result
