"""Step 10: write `summary.json`, and show the headline and the failures as Prefect artifacts."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact

from fleet.model.events import night_finished_event
from fleet.model.summary import NOT_ATTEMPTED, Outcome, Summary, UpdateType
from fleet.model.vocabulary import count, operator_voice, planned_from, said_counts
from orchestration.events import emit
from orchestration.retries import STEP_OPTIONS

PROBLEM_OUTCOMES = (Outcome.failed, Outcome.not_switched_on, Outcome.unchanged, Outcome.unknown)
TABLE_ROWS = 500  # an artifact is for a person; summary.json holds every row


def headline(summary: Summary) -> str:
    """A few markdown lines: what happened tonight, in numbers, in the words of the reports."""
    by_outcome = summary.counts.by_outcome
    attempted = sum(number for outcome, number in by_outcome.items() if outcome not in NOT_ATTEMPTED)
    title = "Dry run" if summary.dry_run else "Nightly maintenance"
    found = f"{count(len(summary.sites), 'site')}, {count(len(summary.items), 'item')} found"
    listed = operator_voice(summary.dry_run).listed(said_counts(summary))
    lines = [
        f"# {title} {summary.run_id}",
        "",
        (f"{found}: {listed}; {planned_from(summary.last_sync)}." if summary.dry_run
         else f"{found}, {attempted} attempted: {listed}"),
        "",
        "| type | items |",
        "| --- | --- |",
        *(f"| {t.value} | {summary.counts.by_type[t]} |" for t in UpdateType if summary.counts.by_type.get(t)),
    ]
    unhealthy = [site for site in summary.sites if site.check is not None and not site.check.healthy]
    if unhealthy:
        lines += ["", f"{count(len(unhealthy), 'site')} failed the health check after the updates."]
    for cohort in summary.cohorts:
        if cohort.status != "completed":
            lines += ["", f"Cohort `{cohort.name}`: {cohort.status} ({cohort.reason})"]
    lines += ["", *(f"- {error}" for error in summary.errors)] if summary.errors else []
    return "\n".join(lines)


def failure_rows(summary: Summary) -> list[dict[str, object]]:
    return [
        {"site": item.site_name, "url": item.site_url, "type": item.type.value, "item": item.name,
         "from": item.from_version, "to": item.to_version, "outcome": item.outcome.value, "reason": item.reason}
        for item in summary.items
        if item.outcome in PROBLEM_OUTCOMES
    ][:TABLE_ROWS]


async def write_summary(summary: Summary, run_dir: Path) -> Path:
    path = summary.write(run_dir)
    key = "nightly-" + "".join(ch if ch.isalnum() else "-" for ch in summary.run_id.lower())
    await acreate_markdown_artifact(headline(summary), key=f"{key}-headline"[:100], description="Run headline")
    rows = failure_rows(summary)
    if rows:
        await acreate_table_artifact(rows, key=f"{key}-failures"[:100], description="Items that did not update")
    emit([night_finished_event(summary, summary.dashboard or "")])
    await tell_security_news(summary, run_dir.parent / "alerts")
    return path


async def tell_security_news(summary: Summary, alerts: Path) -> None:
    """Each vulnerability the night saw first (at or above the policy's threshold) to the operator, once: by e-mail
    (or `.eml`) and through the notification blocks. Bad mail settings never stop the night (the file is written)."""
    from orchestration.night_alerts import run_ui_url
    from reporting.alert import SecurityNotice, dashboard_name, deliver_alert
    from reporting.settings import MailSettings

    for news in summary.security_news:
        notice = SecurityNotice(run_name=summary.run_id, dashboard=dashboard_name(summary.dashboard), news=news,
                                run_url=run_ui_url())
        await deliver_alert(notice, MailSettings.alerts_only(), alerts)


write_summary_task = task(write_summary, name="summarise", **STEP_OPTIONS)
