"""What a run shows in the Prefect UI besides its log: artifacts under keys Prefect accepts, and the night's headline
and its failures (summary.json holds every row)."""

from __future__ import annotations

from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact

from fleet.model.summary import NOT_ATTEMPTED, Outcome, Summary, UpdateType
from fleet.model.vocabulary import count, operator_voice, planned_from, said_counts

PROBLEM_OUTCOMES = (Outcome.failed, Outcome.not_switched_on, Outcome.unchanged, Outcome.unknown)
TABLE_ROWS = 500  # an artifact is for a person; summary.json holds every row


def artifact_key(run_id: str, prefix: str = "report") -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    return (f"{prefix}-" + "".join(ch if ch.isalnum() else "-" for ch in run_id.lower()))[:100]


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


async def show_summary(summary: Summary) -> None:
    """The night's headline, and its failures when there are any, as artifacts of this run."""
    key = "nightly-" + "".join(ch if ch.isalnum() else "-" for ch in summary.run_id.lower())
    await acreate_markdown_artifact(headline(summary), key=f"{key}-headline"[:100], description="Run headline")
    rows = failure_rows(summary)
    if rows:
        await acreate_table_artifact(rows, key=f"{key}-failures"[:100], description="Items that did not update")
