"""`sync_fleet`: sync the selected sites and say which could not be synced. Also the opening every flow shares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from prefect import flow, get_run_logger
from prefect.utilities.annotations import quote

from dashboard.block import DashboardConnection
from dashboard.client import DashboardClient
from dashboard.settings import DashboardSettings
from fleet.model.settings import PipelineSettings
from fleet.model.summary import ReportClient, Selection
from fleet.pacing.fan_out import chunked, fan_out
from fleet.rules.plan import SiteRecord, SiteStatus, check_selection, select_sites
from fleet.rules.sync_failures import apply_sync_failures
from fleet.state.dashboard_memory import DashboardMemory
from flows.parameters import FleetSelection, SavedDashboard
from tasks.detect import load_fleet_task
from tasks.sync import sync_sites_task

T = TypeVar("T")
R = TypeVar("R")


async def open_dashboard(block: DashboardConnection | None, settings: PipelineSettings) -> DashboardClient:
    """The saved connection `block` (a flow parameter: the Prefect UI offers the saved blocks), else the FLEET_*
    environment; never more than `settings.concurrency` requests in flight, however many steps and chunks run
    at once."""
    if block is not None:
        return DashboardClient.from_block(block, max_connections=settings.concurrency)
    return DashboardClient.from_env(max_connections=settings.concurrency)


def dashboard_memory(block: DashboardConnection | None, settings: PipelineSettings) -> DashboardMemory:
    """Where the memory of the dashboard a run serves lives, its night lock included: the saved block's address,
    else FLEET_BASE_URL's."""
    return DashboardMemory(settings.home_state_path, block.base_url if block is not None else
                           DashboardSettings().base_url)


async def select_fleet(
    client: DashboardClient, selection: Selection
) -> tuple[list[SiteRecord], list[ReportClient]]:
    """The selected sites and the dashboard's clients; a selection value that matches no site raises
    `NoSiteMatches` here, before any request that writes."""
    # the first contact is not retried as a step: the client has retried the requests, and a dashboard that
    # cannot be reached (or refuses the key) must be said at once, before anything was done
    fleet, clients = await load_fleet_task.with_options(retries=0)(client)
    check_selection(fleet, selection)
    return select_sites(fleet, selection), clients


async def run_in_chunks(
    step: Callable[[list[T], str], Awaitable[R]], values: list[T], settings: PipelineSettings
) -> list[R]:
    """One task run per chunk of `settings.chunk_size`, `settings.concurrency` chunks at once.

    Each chunk may fan out up to the whole concurrency: the client keeps the total in flight within it
    (`open_dashboard`), so a chunk left alone at the end still keeps the dashboard busy.
    """
    chunks = chunked(values, settings.chunk_size)
    numbered = [(f"{number}-of-{len(chunks)}", chunk) for number, chunk in enumerate(chunks, start=1)]
    return await fan_out(numbered, lambda pair: step(pair[1], pair[0]), settings.concurrency)


async def sync_selected(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings
) -> list[SiteRecord]:
    """Sync the usable sites in chunk tasks; the sites come back with their status after the sync."""
    usable = [site for site in sites if site.status is SiteStatus.online]
    sizer = settings.call_sizer()
    results = await run_in_chunks(
        lambda chunk, label: sync_sites_task.with_options(task_run_name=f"sync-{label}")(
            client, quote(chunk), settings, sizer=quote(sizer)),
        usable, settings,
    )
    failures = {site_id: failure for result in results for site_id, failure in result.items()}
    return apply_sync_failures(sites, failures)


@flow(name="sync-fleet", log_prints=False)
async def sync_fleet(
    selection: FleetSelection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dashboard: SavedDashboard = None,
) -> dict[str, int]:
    """Sync the selected sites now; returns how many sites ended in each status."""
    settings = PipelineSettings()
    async with await open_dashboard(dashboard, settings) as client:
        sites, _ = await select_fleet(client, selection)
        synced = await sync_selected(client, sites, settings)
    logger = get_run_logger()
    for site in synced:
        if site.status is not SiteStatus.online:
            logger.warning("site %s (%s): %s", site.id, site.url, site.status_reason or site.status.value)
    counts: dict[str, int] = {}
    for site in synced:
        counts[site.status.value] = counts.get(site.status.value, 0) + 1
    return counts
