"""Checks against the emulator (no Prefect): open incidents come from the monitors of sites that are down."""

from __future__ import annotations

from dashboard.client import DashboardClient
from emulator.config import EmulatorConfig
from emulator.testing import InProcessEmulator
from fleet.engine.health_checks import count_open_incidents
from fleet.model.settings import PipelineSettings
from fleet.model.summary import HealthCheck
from fleet.rules.plan import SiteRecord


async def test_open_incidents_are_counted_once_for_all_sites_and_only_for_sites_down():
    async with InProcessEmulator(EmulatorConfig(sites=150, seed=1, time_scale=0.001)) as emulator:
        truth = emulator.emulator.state.sites
        down = {site.id for site in truth.values() if site.monitor and site.monitor.last_status == "down"}
        assert down, "the generated fleet has sites that are down"
        sites = [SiteRecord(id=site.id, url=site.url, name=site.name) for site in truth.values()]
        checks = {site.id: HealthCheck(online=site.id not in down) for site in sites}
        client = DashboardClient.from_credentials(emulator.credentials, transport=emulator.transport)
        async with client:
            counted = await count_open_incidents(client, sites, checks, PipelineSettings())
    assert {site_id for site_id, check in counted.items() if check.open_incidents} == down
    assert all(counted[site_id].open_incidents == 1 for site_id in down)  # one open stream of down beats
    assert all(counted[site_id].online == checks[site_id].online for site_id in checks)


async def test_monitors_that_cannot_be_read_leave_the_checks_as_they_were():
    config = EmulatorConfig(sites=5, seed=1, time_scale=0.001)
    async with InProcessEmulator(config) as emulator:
        credentials = {**emulator.credentials, "api_keys": {"read_write": "wrong==key", "read_only": "wrong==key"}}
        client = DashboardClient.from_credentials(credentials, transport=emulator.transport, retry_attempts=1)
        sites = [SiteRecord(id=1, url="https://a.example/", name="a")]
        checks = {1: HealthCheck(online=True)}
        async with client:
            assert await count_open_incidents(client, sites, checks, PipelineSettings()) == checks
