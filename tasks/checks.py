"""Step 8 as tasks: the sites' health after the updates (`fleet.engine.health_checks`), their home pages before
(`fleet.engine.site_probe`), and the sites refused after an earlier failure revived (`fleet.engine.refused_sites`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
from prefect import task

from fleet.engine.health_checks import check_sites, count_open_incidents
from fleet.engine.refused_sites import revive_refused_sites
from fleet.engine.site_probe import ProbeResult, probe_before_updates
from fleet.model.settings import PipelineSettings
from fleet.model.summary import HealthCheck
from fleet.pacing.call_sizing import CallSizer
from fleet.rules.plan import SiteRecord
from fleet.rules.sync_failures import SyncFailures
from orchestration.call_gate import call_gate
from orchestration.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


@task(name="revive-refused-sites", **STEP_OPTIONS)
async def revive_refused_sites_task(
    client: DashboardClient, sites: list[SiteRecord], failures: SyncFailures,
    settings: PipelineSettings, sizer: CallSizer | None = None,
) -> tuple[SyncFailures, set[int]]:
    """`revive_refused_sites`, each call through this run's gate."""
    return await revive_refused_sites(client, sites, failures, settings, sizer, gate=call_gate())


@task(name="check-sites", **STEP_OPTIONS)
async def check_sites_task(
    client: DashboardClient,
    sites: list[SiteRecord],
    settings: PipelineSettings,
    probe_transport: httpx.AsyncBaseTransport | None = None,
    before: dict[int, ProbeResult] | None = None,
    sizer: CallSizer | None = None,
) -> dict[int, HealthCheck]:
    """`check_sites`, the dashboard's checks through this run's gate."""
    return await check_sites(client, sites, settings, probe_transport, before, sizer, gate=call_gate())


probe_before_updates_task = task(probe_before_updates, name="probe-before-updates", **STEP_OPTIONS)
count_open_incidents_task = task(count_open_incidents, name="count-open-incidents", **STEP_OPTIONS)
