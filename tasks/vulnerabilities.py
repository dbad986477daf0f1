"""Step before the policy: the pending items classed against the vulnerability feed (refreshed when due), and the
installed items without an update matched too, from the dashboard's site records."""

from __future__ import annotations

import asyncio

from prefect import get_run_logger, task

from dashboard.client import DashboardClient
from dashboard.errors import DashboardError
from fleet.engine.vulnerability_review import (
    Installed,
    NightSecurity,
    installed_items,
    review_vulnerabilities,
    sites_offered_fixes,
)
from fleet.model.settings import PipelineSettings
from fleet.rules.plan import DetectedUpdate, SiteRecord, SiteStatus
from fleet.rules.policy import Policy
from tasks.detect import detect_updates, load_fleet
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


async def find_offered_fixes(client: DashboardClient, settings: PipelineSettings, policy: Policy) -> list[int]:
    """Between nights, with no write: the pending items of the dashboard's last sync classed against the feed
    (read again when due, `FLEET_VULN_REFRESH`); the sites offered a fix at or above the policy's threshold (a site
    its record says cannot take updates, suspended or its child too old, is left to the night's report)."""
    sites, _ = await load_fleet(client)
    site_ids = [site.id for site in sites if site.status in (SiteStatus.online, SiteStatus.offline)]
    pending = await detect_updates(client, site_ids, settings.concurrency)
    security = await asyncio.to_thread(review_vulnerabilities, pending, settings.state_path)
    found = sites_offered_fixes(security, policy.security)
    (get_run_logger().warning if security.feed.problem else get_run_logger().info)(
        "security: %d of %d site(s) that can take updates offered a fix at or above the policy's threshold; %s",
        len(found), len(site_ids), security.line())
    return found


find_offered_fixes_task = task(find_offered_fixes, name="find-offered-fixes", **STEP_OPTIONS)
