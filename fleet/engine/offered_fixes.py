"""Between nights, with no write: the sites whose plan would apply a fix at or above the policy's threshold."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fleet.engine.detection import detect_updates, load_fleet, load_ignores
from fleet.engine.vulnerability_review import review_vulnerabilities, sites_offered_fixes
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Selection
from fleet.model.vocabulary import count
from fleet.pacing.progress import PLAIN_LOG, Log
from fleet.rules.holds import hold_remembered
from fleet.rules.plan import Decision, PlanRequest, SiteStatus, build_plan, fixes_only
from fleet.rules.policy import Policy
from fleet.rules.windows import place_in_windows
from fleet.state.first_seen import FirstSeenStore
from fleet.state.holds import HoldStore

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


async def find_offered_fixes(client: DashboardClient, settings: PipelineSettings, policy: Policy, *,
                             log: Log = PLAIN_LOG) -> list[int]:
    """Between nights, with no write: the sites whose plan would apply a fix at or above the policy's threshold,
    planned read-only from the dashboard's last sync, the feed (read again when due), the ignore lists, the
    windows (for a security run: no window day spent), the policy and the holds of the dashboard's memory. A fix
    held, ignored, deferred or excluded is no work: a run with nothing to apply writes nothing (its `log` says why)."""
    now = datetime.now(UTC)
    sites, _ = await load_fleet(client)
    site_ids = [site.id for site in sites if site.status in (SiteStatus.online, SiteStatus.offline)]
    pending = await detect_updates(client, site_ids, settings.concurrency)
    vulnerabilities = await asyncio.to_thread(review_vulnerabilities, pending, settings.home_state_path)
    offered = sites_offered_fixes(vulnerabilities, policy.security)
    if not offered:
        (log.warning if vulnerabilities.feed.problem else log.info)(
            "security: none of %s that can take updates is offered a fix at or above the policy's threshold; %s",
            count(len(site_ids), "site"), vulnerabilities.line())
        return []
    chosen, _ = place_in_windows([site for site in sites if site.id in offered], policy.windows, policy.blackouts,
                                 now)
    pending = [update for update in pending if update.site_id in offered]
    plan = fixes_only(build_plan(PlanRequest(
        run_id="security-check", created_at=now, sites=chosen, pending=pending,
        ignored=await load_ignores(client, offered), policy=policy, selection=Selection(), dry_run=True,
        first_seen=FirstSeenStore(settings.state_path).known((u.release for u in pending), now.date()),
        vulnerabilities=vulnerabilities.items)), policy.security)
    plan.items = hold_remembered(plan.items, HoldStore(settings.state_path).active())
    found = sorted({item.site_id for item in plan.items if item.decision is Decision.apply})
    left = Counter(item.decision.value for item in plan.items if item.decision is not Decision.apply)
    (log.warning if vulnerabilities.feed.problem else log.info)(
        "security: %d of %s that can take updates offered a fix at or above the policy's threshold, %d "
        "with a fix to apply%s; %s", len(offered), count(len(site_ids), "site"), len(found),
        f" (the others' fixes: {', '.join(f'{n} {what}' for what, n in sorted(left.items()))})" if left else "",
        vulnerabilities.line())
    return found
