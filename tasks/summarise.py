"""Step 10 as a task: write `summary.json`, show the headline and the failures as Prefect artifacts, send the night's
last event and tell the operator the vulnerabilities it saw first."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from fleet.model.events import night_finished_event
from fleet.model.summary import Summary
from orchestration.artifacts import show_summary
from orchestration.events import emit
from orchestration.night_alerts import tell_vulnerability_news
from orchestration.retries import STEP_OPTIONS


@task(name="summarise", **STEP_OPTIONS)
async def write_summary_task(summary: Summary, run_dir: Path) -> Path:
    """The summary is written first: whatever is shown or told after, the reports have their contract."""
    path = summary.write(run_dir)
    await show_summary(summary)
    emit([night_finished_event(summary, summary.dashboard or "")])
    await tell_vulnerability_news(summary, run_dir.parent / "alerts")
    return path
