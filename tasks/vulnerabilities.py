"""The vulnerability feed's steps as tasks: the night's pending items classed against it
(`fleet.engine.vulnerability_review`), and between nights the sites offered a fix (`fleet.engine.offered_fixes`)."""

from __future__ import annotations

from prefect import get_run_logger, task

from dashboard.client import DashboardClient
from fleet.engine.offered_fixes import find_offered_fixes
from fleet.engine.vulnerability_review import NightVulnerabilities, review_vulnerabilities_step
from fleet.model.settings import PipelineSettings
from fleet.rules.plan import DetectedUpdate, SiteRecord
from fleet.rules.policy import Policy
from orchestration.retries import STEP_OPTIONS


@task(name="review-vulnerabilities", **STEP_OPTIONS)
async def review_vulnerabilities_task(client: DashboardClient, sites: list[SiteRecord], pending: list[DetectedUpdate],
                                      settings: PipelineSettings, dry_run: bool = False) -> NightVulnerabilities:
    """`review_vulnerabilities_step`, said in this run's log."""
    return await review_vulnerabilities_step(client, sites, pending, settings, dry_run, log=get_run_logger())


@task(name="find-offered-fixes", **STEP_OPTIONS)
async def find_offered_fixes_task(client: DashboardClient, settings: PipelineSettings, policy: Policy) -> list[int]:
    """`find_offered_fixes`, said in this run's log."""
    return await find_offered_fixes(client, settings, policy, log=get_run_logger())
