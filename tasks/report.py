"""Report step: render every report of a run from summary.json and show the operator's in the Prefect UI."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prefect import task
from prefect.artifacts import acreate_markdown_artifact, acreate_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from orchestration.artifacts import artifact_key
from reporting.result import ReportResult
from reporting.run_report import RenderedRun, render_reports, report_result
from reporting.settings import MailSettings
from tasks.notify import notify_task


@task(name="report", cache_policy=NO_CACHE, persist_result=False)
async def report_task(run_dir: Path, mail: MailSettings | None = None) -> RenderedRun:
    """Render the operator's and every client's report (files under RUN_DIR/report/), publish the artifacts: the
    operator's report (its pictures of the broken and review pages inline), and the visual results as a table.
    `mail`: the settings the reports will be sent with (where a client's reply goes).

    Returns the reports by name and file only: the bodies are read back from the files when delivered.
    """
    rendered = await asyncio.to_thread(render_reports, Path(run_dir), mail=mail)
    operator = rendered.operator
    markdown = rendered.path(operator, ".md").read_text(encoding="utf-8")
    await acreate_markdown_artifact(markdown, key=artifact_key(rendered.run_id), description=operator.subject)
    if rendered.visual:  # the screenshots are files on this machine: the table names them, relative to the run
        await acreate_table_artifact(rendered.visual, key=artifact_key(rendered.run_id, "visual"),
                                     description=f"{rendered.visual_note} Image paths are relative to "
                                                 f"{rendered.run_dir}.")
    return rendered


async def report_run(run_dir: Path, *, send: bool = True, settings: MailSettings | None = None) -> ReportResult:
    """The report step of a flow: render, publish, and with `send` deliver (failing the step if any recipient
    was not reached)."""
    settings = (settings or MailSettings()) if send else None
    rendered = await report_task(Path(run_dir), settings)
    deliveries = await notify_task(quote(rendered), settings) if send else []  # quote: Prefect need not walk it
    return report_result(rendered, deliveries)
