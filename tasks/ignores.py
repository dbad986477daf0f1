"""Step 3: the dashboard's ignore lists, the only place ignored items can be seen (the update lists omit them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from fleet.rules.plan import IgnoredUpdate
from tasks.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


async def load_ignores(client: DashboardClient, site_ids: list[int]) -> list[IgnoredUpdate]:
    """Global and per-site ignore entries of the given sites (the dashboard repeats global ones per site)."""
    wanted = set(site_ids)
    return [
        IgnoredUpdate(
            site_id=entry.site_id,
            type=entry.type,
            slug=entry.slug,
            name=entry.name,
            ignored_version=entry.ignored_version or "all_versions",
        )
        for entry in await client.list_ignored_updates()
        if entry.site_id in wanted
    ]


@task(name="load-ignore-lists", **STEP_OPTIONS)
async def load_ignores_task(client: DashboardClient, site_ids: list[int]) -> list[IgnoredUpdate]:
    return await load_ignores(client, site_ids)
