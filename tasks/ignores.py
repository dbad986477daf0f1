"""Step 3: the dashboard's ignore lists, the only place ignored items can be seen (the update lists omit them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from fleet.rules.dashboard_records import ignored_update
from fleet.rules.plan import IgnoreEntry
from orchestration.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


async def load_ignores(client: DashboardClient, site_ids: list[int]) -> list[IgnoreEntry]:
    """Global and per-site ignore entries of the given sites (the dashboard repeats global ones per site)."""
    wanted = set(site_ids)
    return [ignored_update(entry) for entry in await client.list_ignored_updates() if entry.site_id in wanted]


load_ignores_task = task(load_ignores, name="load-ignore-lists", **STEP_OPTIONS)
