"""`check_fleet`: the health of the selected sites right now (dashboard check, home-page probe, the uptime
monitors' open alerts)."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import acreate_table_artifact
from prefect.utilities.annotations import quote

from fleet.model.settings import PipelineSettings
from fleet.model.summary import Selection, SiteReport
from fleet.rules.plan import SiteStatus
from flows.parameters import FleetSelection, SavedDashboard
from flows.sync import open_dashboard, run_in_chunks, select_fleet
from tasks.checks import check_sites_task, count_open_incidents_task


@flow(name="check-fleet", log_prints=False)
async def check_fleet(
    selection: FleetSelection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dashboard: SavedDashboard = None,
) -> list[SiteReport]:
    """Check the selected sites now (the selection's update types play no part); returns each usable site with its
    check (the unhealthy ones are also shown in a table artifact)."""
    settings = PipelineSettings()
    async with await open_dashboard(dashboard, settings) as client:
        sites, _ = await select_fleet(client, selection)
        usable = [site for site in sites if site.status is SiteStatus.online]
        parts = await run_in_chunks(
            lambda chunk, label: check_sites_task.with_options(task_run_name=f"check-{label}")(
                client, quote(chunk), settings),
            usable, settings,
        )
        checks = {site_id: check for part in parts for site_id, check in part.items()}
        checks = await count_open_incidents_task(client, quote(usable), quote(checks), settings)
    by_id = {site.id: site for site in usable}
    rows = [
        {"site": by_id[site_id].name, "url": by_id[site_id].url, "online": check.online,
         "http_code": check.http_code, "probe": check.probe_error or "ok", "open_incidents": check.open_incidents,
         "error": check.error}
        for site_id, check in checks.items()
        if not check.healthy or check.open_incidents
    ]
    if rows:
        await acreate_table_artifact(rows, key="fleet-check-problems", description="Sites that failed a check")
    return [SiteReport(site_id=site.id, site_url=site.url, site_name=site.name, client=site.client,
                 status=site.status.value, check=checks.get(site.id)) for site in usable]
