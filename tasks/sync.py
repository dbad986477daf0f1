"""Step 1: sync the selected sites, so that everything after works on what the sites report tonight."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from dashboard.models import BatchSiteError
from fleet.execution import split_evenly
from fleet.fan_out import fan_out
from fleet.plan import SiteRecord
from fleet.settings import PipelineSettings
from tasks.retries import STEP_OPTIONS
from tasks.sensor import wait_for_batch_job

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


class SiteErrorIndex:
    """Maps the identifiers batch errors carry (a site id, its URL or its domain) back to site ids."""

    def __init__(self, sites: list[SiteRecord]) -> None:
        self._ids = {}
        for site in sites:
            for key in (*site.names, site.url.lower().rstrip("/")):
                self._ids[key] = site.id

    def site_id(self, error: BatchSiteError) -> int | None:
        if error.site_id:
            return error.site_id
        for value in (error.identifier, error.site_url):
            text = (value or "").strip().lower().rstrip("/")
            if not text:
                continue
            found = self._ids.get(text) or self._ids.get(SiteRecord(id=0, url=text, name="").domain)
            if found is not None:
                return found
        return None


def describe(code: str, message: str) -> str:
    return f"{message} [{code}]" if code else message


async def sync_sites(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings
) -> dict[int, tuple[str, str]]:
    """Sync the sites in calls of at most the dashboard's threshold; return {site id: (code, message)} of failures.

    Immediate calls are preferred (they answer per site); a call the dashboard queues anyway is waited on.
    """
    index = SiteErrorIndex(sites)
    failures: dict[int, tuple[str, str]] = {}

    async def sync_call(site_ids: list[int]) -> None:
        start = await client.sync_sites(site_ids)
        for error in start.errors + (start.result.errors if start.result else []):
            site_id = index.site_id(error)
            if site_id is not None:
                failures[site_id] = (error.code, describe(error.code, error.message))
        if start.queued and start.job_id:
            outcome = await wait_for_batch_job(client, start.job_id, "sync", site_ids, settings)
            for report in outcome.reports:
                failures[report.site_id] = ("sync_failed", report.message or "sync failed")
            if not outcome.finished:
                for site_id in site_ids:
                    failures.setdefault(site_id, ("sync_unfinished", f"sync job {start.job_id}: {outcome.job.reason}"))

    ids = [site.id for site in sites]
    await fan_out(split_evenly(ids, settings.batch_threshold), sync_call, settings.concurrency)
    return failures


@task(name="sync-sites", task_run_name="sync-{label}", **STEP_OPTIONS)
async def sync_sites_task(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings, label: str = "chunk"
) -> dict[int, tuple[str, str]]:
    return await sync_sites(client, sites, settings)
