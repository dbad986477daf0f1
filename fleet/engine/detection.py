"""Steps 2 and 3: the fleet as the dashboard knows it, the updates it offers for the selected sites (with MainWP's
memory of rolled-back versions), and its ignore lists, the only place ignored items can be seen (the update lists
omit them)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dashboard.errors import DashboardError
from dashboard.models import UpdateType
from fleet.model.summary import Outcome, ReportClient, Summary
from fleet.pacing.fan_out import chunked, fan_out
from fleet.rules.dashboard_records import ignored_update, pending_update, site_record
from fleet.rules.plan import Decision, DetectedUpdate, IgnoreEntry, Plan, SiteRecord
from fleet.rules.policy import Rule
from fleet.rules.rolled_back import rollback_readable
from fleet.state.rollback_reads import RollbackReads

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

INCLUDE_LIMIT = 100  # site ids per list request (they travel in the query string)
log = logging.getLogger("fleet.detect")


async def load_fleet(client: DashboardClient) -> tuple[list[SiteRecord], list[ReportClient]]:
    clients = await client.list_clients()
    names = {entry.id: entry.name for entry in clients}
    sites = [site_record(site, names) for site in await client.list_sites()]
    return sites, [ReportClient(name=entry.name, email=entry.email) for entry in clients]


async def detect_updates(
    client: DashboardClient, site_ids: list[int], concurrency: int = 4, rollbacks: bool | frozenset[int] = False
) -> list[DetectedUpdate]:
    """Pending updates of the given sites (the dashboard leaves ignored ones out of this list); with `rollbacks`
    (True: every site, or these sites: `fleet.state.rollback_reads`), those MainWP remembers WordPress rolled back
    marked (the plan holds them; a re-list to reconcile needs not).

    Read in slices of at most `INCLUDE_LIMIT` sites, several at once: each answer then covers only its sites
    instead of every page walking the whole fleet.
    """
    wanted = set(site_ids)
    slices = chunked(sorted(wanted), INCLUDE_LIMIT)
    listed = await fan_out(slices, lambda ids: client.list_updates(include=ids), concurrency)
    pending = [pending_update(update) for part in listed for update in part if update.site_id in wanted]
    if rollbacks is False:
        return pending
    return await mark_rolled_back(client, pending, concurrency, None if rollbacks is True else rollbacks)


async def mark_rolled_back(client: DashboardClient, pending: list[DetectedUpdate], concurrency: int,
                           only: frozenset[int] | None = None) -> list[DetectedUpdate]:
    """`rolled_back` on each offered plugin or theme version MainWP remembers WordPress rolled back on its site
    (one read of the site's update detail per site offered a plugin or theme, of `only` these when given; a read
    that fails only warns)."""
    asked = sorted(rollback_readable(pending, only))

    async def read(site_id: int) -> set[tuple[int, UpdateType, str, str]]:
        try:
            found = await client.rolled_back_updates(site_id)
        except DashboardError as error:
            log.warning("site %s: the versions MainWP rolled back could not be read: %s", site_id, error)
            return set()
        return {(site_id, rollback.type, rollback.slug, rollback.version or "") for rollback in found}

    remembered = set().union(*await fan_out(asked, read, concurrency)) if asked else set()
    if not remembered:
        return pending
    return [update.model_copy(update={"rolled_back": True})
            if (update.site_id, update.type, update.slug, update.to_version or "") in remembered else update
            for update in pending]


def remember_rollback_reads(summary: Summary, plan: Plan, read_only: frozenset[int] | None,
                            reads: RollbackReads) -> None:
    """After a night that wrote: which sites the next night reads the rollback memory of."""
    listed = [item for item in plan.items if item.decision is not Decision.ignored]
    troubled = {item.site_id for item in summary.items
                if item.outcome in (Outcome.failed, Outcome.unknown) or item.rule == Rule.rolled_back}
    reads.record(rollback_readable(listed, read_only), {item.site_id for item in listed if item.rolled_back},
                 troubled)


async def load_ignores(client: DashboardClient, site_ids: list[int]) -> list[IgnoreEntry]:
    """Global and per-site ignore entries of the given sites (the dashboard repeats global ones per site)."""
    wanted = set(site_ids)
    return [ignored_update(entry) for entry in await client.list_ignored_updates() if entry.site_id in wanted]
