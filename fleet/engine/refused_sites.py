"""The sites the dashboard refused to sync for what an earlier failure left on its records, brought back tonight:
a site repaired since is maintained again instead of skipped night after night."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.errors import DashboardError
from fleet.engine.batch_calls import CallGate
from fleet.engine.health_checks import dashboard_checks
from fleet.engine.sync import sync_sites
from fleet.model.settings import PipelineSettings
from fleet.model.vocabulary import count
from fleet.pacing.call_sizing import CallSizer
from fleet.pacing.fan_out import fan_out
from fleet.rules.plan import SiteRecord
from fleet.rules.sync_failures import (
    SyncFailure,
    SyncFailures,
    known_offline,
    refused_since_a_failed_sync,
    version_lost,
)

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


async def revive_refused_sites(
    client: DashboardClient, sites: list[SiteRecord], failures: SyncFailures,
    settings: PipelineSettings, sizer: CallSizer | None = None, *, gate: CallGate = CallGate(),
) -> tuple[SyncFailures, set[int]]:
    """Bring back the sites the dashboard refused to sync for what an earlier failure left on its records, and
    sync the ones that answer: a site repaired since is maintained again instead of skipped night after night.
    One kept as known offline is checked once (only a passing check clears the flag); one whose sync record lost
    its MainWP Child version (MainWP sets it to 0 on every failed sync, and then refuses every call on the site as
    "child outdated", a passing check or not) is reconnected, which records it again. Returns the sync failures
    left and the sites revived. Every call passes the run's `gate`."""
    by_id = {site.id: site for site in sites}
    left: SyncFailures = dict(failures)
    revived: set[int] = set()
    offline = [by_id[site_id] for site_id in known_offline(left) if site_id in by_id]
    if offline:
        checks = await dashboard_checks(client, offline, settings, sizer, gate=gate)
        answering = [site for site in offline if checks.get(site.id) is not None and checks[site.id].online]
        left, revived = await sync_again(client, answering, left, settings, sizer, gate)
    lost = [by_id[site_id] for site_id in version_lost(left) if site_id in by_id]
    if lost:
        reconnected, unanswered = await reconnect_sites(client, lost, left, settings)
        left |= unanswered
        left, more = await sync_again(client, reconnected, left, settings, sizer, gate)
        revived |= more
    if revived:
        gate.log.info("revived %s the dashboard refused after an earlier failure (a check passed, or a "
                      "reconnect recorded the MainWP Child again): %s", count(len(revived), "site"), sorted(revived))
    return left, revived


async def sync_again(client: DashboardClient, sites: list[SiteRecord], failures: SyncFailures,
                     settings: PipelineSettings, sizer: CallSizer | None, gate: CallGate
                     ) -> tuple[SyncFailures, set[int]]:
    """`sites` synced again: the failures left (theirs replaced by tonight's second answer), those synced."""
    again = await sync_sites(client, sites, settings, sizer, gate=gate) if sites else {}
    ids = {site.id for site in sites}
    return {site_id: failure for site_id, failure in failures.items() if site_id not in ids} | again, ids - set(again)


async def reconnect_sites(client: DashboardClient, sites: list[SiteRecord], failures: SyncFailures,
                          settings: PipelineSettings) -> tuple[list[SiteRecord], SyncFailures]:
    """Each site reconnected (MainWP's own repair for a lost connection record): those that answered, and why each
    other is still refused."""

    async def reconnect(site: SiteRecord) -> tuple[SiteRecord, str | None]:
        try:
            await client.reconnect_site(site.id)
        except DashboardError as error:
            return site, str(error)
        return site, None

    answers = await fan_out(sites, reconnect, settings.concurrency)
    return [site for site, error in answers if error is None], {
        site.id: SyncFailure("reconnect_failed", f"{refused_since_a_failed_sync(failures[site.id].message)}; "
                             f"reconnecting it tonight failed: {error}")
        for site, error in answers if error is not None}
