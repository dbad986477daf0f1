"""Before a lane's first update: both baseline shots of the pages of its sites that the night may change."""

from __future__ import annotations

from prefect import task

from fleet.engine.site_probe import ProbeResult, probe_client
from fleet.engine.visual_watch import VISUAL_STEPS, VisualWatch
from fleet.model.settings import PipelineSettings
from fleet.rules.plan import PlanItem, SiteRecord
from orchestration.retries import STEP_OPTIONS


async def take_baselines(watch: VisualWatch, sites: list[SiteRecord], items: list[PlanItem],
                         before: dict[int, ProbeResult], settings: PipelineSettings) -> int:
    """Shoot the sites that passed the probe before and have a plugin, theme or core update planned (a site
    already down has no look to keep); returns how many sites the night watches so far."""
    changing = {item.site_id for item in items if item.type in VISUAL_STEPS}
    chosen = [site for site in sites if site.id in changing and site.id in before and before[site.id].ok]
    async with probe_client(settings) as http:  # the sitemaps: a visitor's plain GETs
        await watch.take_baselines(chosen, http)
    return len(watch.baselines)


take_baselines_task = task(take_baselines, name="visual-baselines", **STEP_OPTIONS)
