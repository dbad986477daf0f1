"""Step after the summary, as a task: remember the versions the night found bad (`fleet.engine.bad_versions`)."""

from __future__ import annotations

from prefect import task

from fleet.engine.bad_versions import remember_bad_versions
from fleet.model.settings import PipelineSettings
from fleet.model.summary import NightHold, Summary
from orchestration.night_alerts import NightOutbox
from orchestration.retries import STEP_OPTIONS


@task(name="remember-bad-versions", **STEP_OPTIONS)
async def remember_bad_versions_task(summary: Summary, failures_to_hold: int, settings: PipelineSettings,
                                     quiet_days: int = 30) -> list[NightHold]:
    """`remember_bad_versions`, its events sent through this run's outbox."""
    return await remember_bad_versions(summary, failures_to_hold, settings, quiet_days, outbox=NightOutbox())
