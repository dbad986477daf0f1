"""Step before the policy: the pending items classed against the vulnerability feed (refreshed when due), and the
installed items without an update matched too, from the dashboard's site records."""

from __future__ import annotations

import asyncio

from prefect import get_run_logger, task

from dashboard.client import DashboardClient
from dashboard.errors import DashboardError
from fleet.engine.vulnerability_review import Installed, NightSecurity, installed_items, review_vulnerabilities
from fleet.model.settings import PipelineSettings
from fleet.rules.plan import DetectedUpdate, SiteRecord
from tasks.retries import STEP_OPTIONS


async def review_vulnerabilities_step(client: DashboardClient, sites: list[SiteRecord], pending: list[DetectedUpdate],
                                      settings: PipelineSettings, dry_run: bool = False) -> NightSecurity:
    """Async like the flows that call it; the feed (up to 160 MB) is read in a thread. Never fails the night: a
    site list that cannot be read leaves every site's installed items unchecked, said in the log."""
    logger = get_run_logger()
    wanted = {site.id for site in sites}
    try:
        installed: dict[int, list[Installed] | None] = {
            site.id: installed_items(site) for site in await client.list_sites() if site.id in wanted}
    except DashboardError as error:
        logger.warning("security: the installed items could not be listed (%s): every site unchecked", error)
        installed = dict.fromkeys(wanted)
    security = await asyncio.to_thread(review_vulnerabilities, pending, settings.state_path, installed=installed,
                                       sites=sites, remember=not dry_run)
    (logger.warning if security.feed.problem else logger.info)("%s", security.line())
    return security


review_vulnerabilities_task = task(review_vulnerabilities_step, name="review-vulnerabilities", **STEP_OPTIONS)
