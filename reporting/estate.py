"""The combined operator report of one night over many dashboards: the estate first, then one section per
dashboard linking to that dashboard's own report. Rendered from `estate.json`, delivered like the others."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import css_inline

from fleet.engine.estate import DashboardNight, Estate, NightStatus, Tally
from fleet.model.summary import Delivery, Outcome
from fleet.model.vocabulary import LIST_SEPARATOR, Voice, count, operator_voice
from reporting.aggregate import clean
from reporting.mail import Outgoing, build_message, send, write_eml
from reporting.render import environment
from reporting.settings import MailSettings

ESTATE_STEM = "estate"
STATUS_TITLES = {
    NightStatus.completed: "completed",
    NightStatus.failed: "failed",
    NightStatus.unreachable: "unreachable",
    NightStatus.busy: "not started: another night was running",
    NightStatus.not_started: "not started",
}


@dataclass(frozen=True)
class DashboardSection:
    """A dashboard's night as the report shows it; `link` is relative to the report's own directory."""

    night: DashboardNight
    title: str
    link: str | None


@dataclass(frozen=True)
class EstateView:
    estate: Estate
    sections: list[DashboardSection]
    subject: str

    @property
    def voice(self) -> Voice:
        return operator_voice(self.estate.dry_run)

    def said(self, tally: Tally) -> str:
        """A night's counts in the words of every report (`updated 12; failed 1`); an outcome this version does
        not know (a newer summary's) by its own name."""
        known = {outcome: tally.by_outcome[outcome.value] for outcome in Outcome if outcome.value in tally.by_outcome}
        unknown = [f"{clean(name, 40)} {n}" for name, n in sorted(tally.by_outcome.items())
                   if name not in {outcome.value for outcome in Outcome} and n]
        return LIST_SEPARATOR.join(filter(None, [self.voice.listed(known), *unknown]))


def _link(night: DashboardNight, directory: Path) -> str | None:
    report = night.operator_report
    return Path(os.path.relpath(report, directory.resolve())).as_posix() if report else None


def estate_view(estate: Estate, directory: Path) -> EstateView:
    sections = [
        DashboardSection(night, STATUS_TITLES[night.status], _link(night, directory)) for night in estate.nights
    ]
    totals = estate.totals
    done = sum(night.status is NightStatus.completed for night in estate.nights)
    voice = operator_voice(estate.dry_run)
    subject = (
        f"{'[dry run] ' if estate.dry_run else ''}Fleet maintenance {estate.started_at:%Y-%m-%d}: "
        f"{done} of {len(estate.nights)} dashboards completed; {voice.done.word} {count(totals.updated, 'item')}"
        + ("" if estate.dry_run else f"; {voice.attention.word} {count(totals.failed, 'item')}")
    )
    if estate.problems:
        subject += f", {len(estate.problems)} with problems"
    return EstateView(estate, sections, subject)


def render_estate(estate: Estate, directory: Path) -> list[Path]:
    """`estate.html` and `estate.txt` in `directory` (where `estate.json` is)."""
    directory.mkdir(parents=True, exist_ok=True)
    view = estate_view(estate, directory)
    written = []
    for suffix in ("html", "txt"):
        path = directory / f"{ESTATE_STEM}.{suffix}"
        body = environment().get_template(f"estate.{suffix}.j2").render(view=view)
        if suffix == "html":  # mail clients drop <style>: inline it, as the other reports do
            body = css_inline.inline(body, keep_at_rules=True, load_remote_stylesheets=False)
        path.write_text(body, encoding="utf-8")
        written.append(path)
    return written


def deliver_estate(estate: Estate, directory: Path, settings: MailSettings) -> list[Delivery]:
    """Send the combined report to the operator addresses (or write `estate.eml` without SMTP settings)."""
    view = estate_view(estate, directory)
    message = build_message(
        sender=settings.sender,
        recipients=settings.report_to,
        subject=view.subject,
        text=(directory / f"{ESTATE_STEM}.txt").read_text(encoding="utf-8"),
        html=(directory / f"{ESTATE_STEM}.html").read_text(encoding="utf-8"),
        images={},
        reply_to=settings.reply_to,
    )
    outgoing = Outgoing("operator", settings.report_to, message, ESTATE_STEM)
    if not settings.configured:
        return write_eml(outgoing, directory, "no SMTP host configured (FLEET_SMTP_HOST)")
    if not settings.report_to:
        return [Delivery(report="operator", recipient="", accepted=False, answer="not sent: FLEET_REPORT_TO is empty")]
    return send(settings, outgoing).deliveries
