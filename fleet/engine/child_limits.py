"""MainWP's limits on its calls to child sites, read once a night: the syncs and updates are planned around them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashboard.errors import DashboardError
from dashboard.models import ConnectionLimits
from fleet.model.settings import PipelineSettings
from fleet.model.vocabulary import count
from fleet.pacing.child_slots import ChildSlots, server_key
from fleet.pacing.progress import PLAIN_LOG, Log
from fleet.rules.plan import SiteRecord

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


async def read_child_slots(client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings,
                           log: Log = PLAIN_LOG) -> ChildSlots:
    """MainWP's limits on its calls to child sites (read once a night; its defaults when the key cannot read
    the settings), with the server of each site: the night's syncs and updates are planned around them."""
    try:
        limits = await client.connection_limits()
    except DashboardError as error:
        limits = ConnectionLimits()
        log.warning("the dashboard's limits on calls to child sites could not be read (%s): planning with "
                    "MainWP's defaults", error)
    slots = ChildSlots(limits, settings.time_scale, {site.id: server_key(site.id, site.ip) for site in sites})
    log.info("calls to child sites: at most %d at once, %d ms apart, %d per server, %d ms apart per server; "
             "%s on %s", limits.maximum_requests, limits.minimum_delay_ms, limits.maximum_ip_requests,
             limits.minimum_ip_delay_ms, count(len(sites), "site"), count(len(set(slots.servers.values())), "server"))
    return slots
