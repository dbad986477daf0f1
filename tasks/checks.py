"""Step 8: after the updates, are the updated sites healthy? The dashboard's check, a home-page probe, incidents."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import httpx
from prefect import task

from dashboard.errors import DashboardError
from dashboard.wire import AiohttpWire
from fleet.engine.batch_calls import BatchCall, send_batch_calls
from fleet.engine.site_probe import ProbeResult, probe_home_page, probe_url
from fleet.engine.sync import sync_sites
from fleet.model.settings import PipelineSettings
from fleet.model.summary import HealthCheck
from fleet.pacing.call_sizing import CallSizer, Operation, Work
from fleet.pacing.fan_out import fan_out
from fleet.rules.plan import SiteRecord
from fleet.rules.site_errors import SiteErrorIndex, error_message
from fleet.rules.sync_failures import (
    SyncFailure,
    SyncFailures,
    known_offline,
    refused_since_a_failed_sync,
    version_lost,
)
from orchestration.call_gate import call_gate
from orchestration.progress import step_logger
from orchestration.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

OPEN_INCIDENT_STATUSES = ("down", "pending")
log = logging.getLogger("fleet.checks")


async def dashboard_checks(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings, sizer: CallSizer | None = None
) -> dict[int, HealthCheck]:
    """`check-sites-v1` over the sites in calls sized by time (a queued check is waited on; it then reports
    only failures). A lost answer is not a failing site: the sites of a call whose answer was lost are checked
    once more, in calls of their own; lost again, their check is `unverified` (nothing was seen failing)."""
    sizer = sizer or settings.call_sizer()
    checks, lost = await _check_once(client, sites, settings, sizer)
    if lost:
        log.warning("the check's answer was lost for %d site(s): checking them once more", len(lost))
        again, lost_again = await _check_once(client, [site for site in sites if site.id in lost], settings, sizer)
        checks |= again | {site_id: HealthCheck(unverified=f"the check's answer was lost twice ({lost[site_id]}; "
                                                           f"then {why})") for site_id, why in lost_again.items()}
    return checks


async def _check_once(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings, sizer: CallSizer
) -> tuple[dict[int, HealthCheck], dict[int, str]]:
    """The checks the calls answered, and the sites whose call's answer was lost (with what was lost)."""
    checks: dict[int, HealthCheck] = {}
    lost: dict[int, str] = {}

    async def send(call: BatchCall) -> object:
        return await client.check_sites(call.site_ids)

    async def read(call: BatchCall) -> None:
        if call.lost is not None:
            lost.update({site_id: str(call.lost) for site_id in call.site_ids})
            return
        if call.answer.result is not None:
            for checked in call.answer.result.checked:
                if checked.id is not None and checked.status is not None:
                    checks[checked.id] = HealthCheck(online=checked.status.online, http_code=checked.status.http_code,
                                                   response_ms=_ms(checked.status.response_time))
        for site_id, error in call.refused + call.failed:
            checks[site_id] = HealthCheck(online=False, error=error_message(error.code, error.message))
        if call.job is not None:
            failed = {report.site_id: report.message for report in call.job.reports}
            for site_id in call.site_ids:
                if site_id in failed:
                    checks[site_id] = HealthCheck(online=False, error=failed[site_id])
                elif not call.job.finished:
                    checks.setdefault(site_id, HealthCheck(error=f"check job {call.job_id}: {call.job.job.reason}"))
                else:
                    checks.setdefault(site_id, HealthCheck(online=True))

    await send_batch_calls(client, sizer, Operation.check, {None: [Work(site.id) for site in sites]}, send, read,
                           settings, SiteErrorIndex(sites), "check", gate=call_gate())
    return checks, lost


async def revive_refused_sites(
    client: DashboardClient, sites: list[SiteRecord], failures: SyncFailures,
    settings: PipelineSettings, sizer: CallSizer | None = None,
) -> tuple[SyncFailures, set[int]]:
    """Bring back the sites the dashboard refused to sync for what an earlier failure left on its records, and
    sync the ones that answer: a site repaired since is maintained again instead of skipped night after night.
    One kept as known offline is checked once (only a passing check clears the flag); one whose sync record lost
    its MainWP Child version (MainWP sets it to 0 on every failed sync, and then refuses every call on the site as
    "child outdated", a passing check or not) is reconnected, which records it again. Returns the sync failures
    left and the sites revived."""
    by_id = {site.id: site for site in sites}
    left: SyncFailures = dict(failures)
    revived: set[int] = set()
    offline = [by_id[site_id] for site_id in known_offline(left) if site_id in by_id]
    if offline:
        checks = await dashboard_checks(client, offline, settings, sizer)
        answering = [site for site in offline if checks.get(site.id) is not None and checks[site.id].online]
        left, revived = await sync_again(client, answering, left, settings, sizer)
    lost = [by_id[site_id] for site_id in version_lost(left) if site_id in by_id]
    if lost:
        reconnected, unanswered = await reconnect_sites(client, lost, left, settings)
        left |= unanswered
        left, more = await sync_again(client, reconnected, left, settings, sizer)
        revived |= more
    if revived:
        step_logger().info("revived %d site(s) the dashboard refused after an earlier failure (a check passed, or a "
                           "reconnect recorded the MainWP Child again): %s", len(revived), sorted(revived))
    return left, revived


async def sync_again(client: DashboardClient, sites: list[SiteRecord], failures: SyncFailures,
                     settings: PipelineSettings, sizer: CallSizer | None) -> tuple[SyncFailures, set[int]]:
    """`sites` synced again: the failures left (theirs replaced by tonight's second answer), those synced."""
    again = await sync_sites(client, sites, settings, sizer, gate=call_gate()) if sites else {}
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


revive_refused_sites_task = task(revive_refused_sites, name="revive-refused-sites", **STEP_OPTIONS)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


async def open_incidents(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings
) -> dict[int, int]:
    """Unresolved incidents of the sites' uptime monitors (only monitors not reporting up are asked)."""
    by_url = {site.url.rstrip("/").lower(): site.id for site in sites}
    monitors = [
        (by_url[monitor.url.rstrip("/").lower()], monitor)
        for monitor in await client.list_monitors()
        if monitor.id and monitor.url.rstrip("/").lower() in by_url
        and (monitor.last_status or "").lower() in OPEN_INCIDENT_STATUSES
    ]

    async def count(pair: tuple[int, object]) -> tuple[int, int]:
        site_id, monitor = pair
        incidents = await client.monitor_incidents(monitor.id)  # type: ignore[attr-defined]
        return site_id, sum(1 for incident in incidents if not incident.resolved)

    counted = await fan_out(monitors, count, settings.concurrency)
    return {site_id: number for site_id, number in counted if number}


def probe_client(settings: PipelineSettings, transport: httpx.AsyncBaseTransport | None = None) -> httpx.AsyncClient:
    """What the night asks the sites' own pages with (a visitor's plain GET, no dashboard work)."""
    return httpx.AsyncClient(transport=transport or AiohttpWire(verify=settings.verify_tls),
                             timeout=settings.probe_timeout_seconds, headers={"User-Agent": "fleet-maintenance probe"})


async def probe_sites(
    sites: list[SiteRecord], settings: PipelineSettings, transport: httpx.AsyncBaseTransport | None = None
) -> list[ProbeResult | None]:
    """The home-page probe of each site (None for every site when probing is turned off). A probe whose answer
    was lost (a timeout, a cut connection) is asked once more before it counts: a lost answer is not a broken
    site."""
    if not settings.probe_sites:
        return [None] * len(sites)
    async with probe_client(settings, transport) as http:
        async def probe(url: str) -> ProbeResult:
            first = await probe_home_page(http, url)
            return await probe_home_page(http, url) if first.lost else first

        urls = [probe_url(site.url, settings.probe_url_template) for site in sites]
        return await fan_out(urls, probe, settings.probe_concurrency)


async def probe_before_updates(
    sites: list[SiteRecord], settings: PipelineSettings, transport: httpx.AsyncBaseTransport | None = None
) -> dict[int, ProbeResult]:
    """Each site's home page before the night touches it: a site failing after is broken by the night only if
    it passed here."""
    probes = await probe_sites(sites, settings, transport)
    return {site.id: probe for site, probe in zip(sites, probes, strict=True) if probe is not None}


async def check_sites(
    client: DashboardClient,
    sites: list[SiteRecord],
    settings: PipelineSettings,
    probe_transport: httpx.AsyncBaseTransport | None = None,
    before: dict[int, ProbeResult] | None = None,
    sizer: CallSizer | None = None,
) -> dict[int, HealthCheck]:
    """One `HealthCheck` per site (the dashboard's check, the probe, and the probe `before` the updates if given):
    a failing part is recorded, never raised.

    Open incidents are counted once for all checked sites (`count_open_incidents`): the monitor list is fleet-wide.
    """
    try:
        checks = await dashboard_checks(client, sites, settings, sizer)
    except DashboardError as error:
        checks = {site.id: HealthCheck(error=f"check-sites failed: {error}") for site in sites}
    probes = await probe_sites(sites, settings, probe_transport)
    before = before or {}
    results = {}
    for site, probe in zip(sites, probes, strict=True):
        check = checks.get(site.id, HealthCheck())
        if probe is not None:
            check = check.model_copy(update={
                "http_code": check.http_code or probe.http_code,  # 0: the dashboard's check got no answer
                "response_ms": check.response_ms if check.response_ms is not None else probe.response_ms,
                "probe_ok": probe.ok,
                "probe_error": probe.error,
            })
        if site.id in before:
            check = check.model_copy(update={"before_ok": before[site.id].ok, "before_error": before[site.id].error})
        results[site.id] = check
    return results


async def count_open_incidents(
    client: DashboardClient, sites: list[SiteRecord], checks: dict[int, HealthCheck], settings: PipelineSettings
) -> dict[int, HealthCheck]:
    """The checks with each site's open incidents; monitoring is optional on a dashboard, so a failure only warns."""
    try:
        incidents = await open_incidents(client, sites, settings)
    except DashboardError as error:
        log.warning("uptime monitors could not be read: %s", error)
        return checks
    return {
        site_id: check.model_copy(update={"open_incidents": incidents[site_id]}) if site_id in incidents else check
        for site_id, check in checks.items()
    }


check_sites_task = task(check_sites, name="check-sites", **STEP_OPTIONS)
probe_before_updates_task = task(probe_before_updates, name="probe-before-updates", **STEP_OPTIONS)
count_open_incidents_task = task(count_open_incidents, name="count-open-incidents", **STEP_OPTIONS)
