"""Step before the policy: the pending items classed against the vulnerability feed (refreshed when due), and the
installed items without an update matched too, from the dashboard's site records."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime

from prefect import get_run_logger, task

from dashboard.client import DashboardClient
from dashboard.errors import DashboardError
from fleet.engine.detection import detect_updates, load_fleet, load_ignores
from fleet.engine.vulnerability_review import (
    Installed,
    NightSecurity,
    installed_items,
    review_vulnerabilities,
    sites_offered_fixes,
)
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Selection
from fleet.rules.holds import hold_remembered
from fleet.rules.plan import Decision, DetectedUpdate, SiteRecord, SiteStatus, build_plan, fixes_only
from fleet.rules.policy import Policy
from fleet.rules.windows import place_in_windows
from fleet.state.first_seen import FirstSeenStore
from fleet.state.holds import HoldStore
from orchestration.retries import STEP_OPTIONS


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
    security = await asyncio.to_thread(review_vulnerabilities, pending, settings.home_state_path,
                                       installed=installed, sites=sites,
                                       memory=None if dry_run else settings.state_path)
    (logger.warning if security.feed.problem else logger.info)("%s", security.line())
    return security


review_vulnerabilities_task = task(review_vulnerabilities_step, name="review-vulnerabilities", **STEP_OPTIONS)


async def find_offered_fixes(client: DashboardClient, settings: PipelineSettings, policy: Policy) -> list[int]:
    """Between nights, with no write: the sites whose plan would apply a fix at or above the policy's threshold,
    planned read-only from the dashboard's last sync, the feed (read again when due), the ignore lists, the
    windows (for a security run: no window day spent), the policy and the holds of the dashboard's memory. A fix
    held, ignored, deferred or excluded is no work: a run with nothing to apply writes nothing (its log says why)."""
    logger = get_run_logger()
    now = datetime.now(UTC)
    sites, _ = await load_fleet(client)
    site_ids = [site.id for site in sites if site.status in (SiteStatus.online, SiteStatus.offline)]
    pending = await detect_updates(client, site_ids, settings.concurrency)
    security = await asyncio.to_thread(review_vulnerabilities, pending, settings.home_state_path)
    offered = sites_offered_fixes(security, policy.security)
    if not offered:
        (logger.warning if security.feed.problem else logger.info)(
            "security: none of %d site(s) that can take updates is offered a fix at or above the policy's "
            "threshold; %s", len(site_ids), security.line())
        return []
    chosen, _ = place_in_windows([site for site in sites if site.id in offered], policy.windows, policy.blackouts,
                                 now)
    pending = [update for update in pending if update.site_id in offered]
    plan = fixes_only(build_plan(
        run_id="security-check", created_at=now, sites=chosen, pending=pending,
        ignored=await load_ignores(client, offered), policy=policy, selection=Selection(), dry_run=True,
        first_seen=FirstSeenStore(settings.state_path).known((u.release for u in pending), now.date()),
        security=security.items), policy.security)
    plan.items = hold_remembered(plan.items, HoldStore(settings.state_path).active())
    found = sorted({item.site_id for item in plan.items if item.decision is Decision.apply})
    left = Counter(item.decision.value for item in plan.items if item.decision is not Decision.apply)
    (logger.warning if security.feed.problem else logger.info)(
        "security: %d of %d site(s) that can take updates offered a fix at or above the policy's threshold, %d "
        "with a fix to apply%s; %s", len(offered), len(site_ids), len(found),
        f" (the others' fixes: {', '.join(f'{n} {what}' for what, n in sorted(left.items()))})" if left else "",
        security.line())
    return found


find_offered_fixes_task = task(find_offered_fixes, name="find-offered-fixes", **STEP_OPTIONS)
