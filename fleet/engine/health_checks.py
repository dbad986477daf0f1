"""Step 8: after the updates, are the updated sites healthy? The dashboard's check, a home-page probe, incidents."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import httpx

from dashboard.errors import DashboardError
from fleet.engine.batch_calls import BatchCall, CallGate, send_batch_calls
from fleet.engine.site_probe import ProbeResult, probe_sites
from fleet.model.settings import PipelineSettings
from fleet.model.summary import HealthCheck
from fleet.model.vocabulary import count
from fleet.pacing.call_sizing import CallSizer, Operation, Work
from fleet.pacing.fan_out import fan_out
from fleet.rules.plan import SiteRecord
from fleet.rules.site_errors import SiteErrorIndex, error_message

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

OPEN_INCIDENT_STATUSES = ("down", "pending")
log = logging.getLogger("fleet.checks")


async def dashboard_checks(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings, sizer: CallSizer | None = None,
    *, gate: CallGate = CallGate(),
) -> dict[int, HealthCheck]:
    """`check-sites-v1` over the sites in calls sized by time (a queued check is waited on; it then reports
    only failures). A lost answer is not a failing site: the sites of a call whose answer was lost are checked
    once more, in calls of their own; lost again, their check is `unverified` (nothing was seen failing)."""
    sizer = sizer or settings.call_sizer()
    checks, lost = await _check_once(client, sites, settings, sizer, gate)
    if lost:
        log.warning("the check's answer was lost for %s: checking again", count(len(lost), "site"))
        again, lost_again = await _check_once(client, [site for site in sites if site.id in lost], settings, sizer,
                                                 gate)
        checks |= again | {site_id: HealthCheck(unverified=f"the check's answer was lost twice ({lost[site_id]}; "
                                                           f"then {why})") for site_id, why in lost_again.items()}
    return checks


async def _check_once(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings, sizer: CallSizer, gate: CallGate
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
                           settings, SiteErrorIndex(sites), "check", gate=gate)
    return checks, lost


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


async def check_sites(
    client: DashboardClient,
    sites: list[SiteRecord],
    settings: PipelineSettings,
    probe_transport: httpx.AsyncBaseTransport | None = None,
    before: dict[int, ProbeResult] | None = None,
    sizer: CallSizer | None = None,
    *,
    gate: CallGate = CallGate(),
) -> dict[int, HealthCheck]:
    """One `HealthCheck` per site (the dashboard's check, the probe, and the probe `before` the updates if given):
    a failing part is recorded, never raised.

    Open incidents are counted once for all checked sites (`count_open_incidents`): the monitor list is fleet-wide.
    The dashboard's checks pass the run's `gate`.
    """
    try:
        checks = await dashboard_checks(client, sites, settings, sizer, gate=gate)
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
