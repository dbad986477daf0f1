"""Step after the plan: the pending items classed against the vulnerability feed (refreshed when due)."""

from __future__ import annotations

import asyncio

from prefect import get_run_logger, task

from fleet.engine.vulnerability_review import NightSecurity, review_vulnerabilities
from fleet.model.settings import PipelineSettings
from fleet.rules.plan import Plan
from tasks.retries import STEP_OPTIONS


async def review_vulnerabilities_step(plan: Plan, settings: PipelineSettings) -> NightSecurity:
    """Async like the flows that call it; the feed (up to 160 MB) is read in a thread. Never fails the night."""
    security = await asyncio.to_thread(review_vulnerabilities, plan.items, settings.state_path)
    logger = get_run_logger()
    (logger.warning if security.feed.problem else logger.info)("%s", security.line())
    return security


review_vulnerabilities_task = task(review_vulnerabilities_step, name="review-vulnerabilities", **STEP_OPTIONS)
