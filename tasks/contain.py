"""After each update step, as tasks: probe the sites it touched and contain the ones it broke
(`fleet.engine.probe_after_step`); on the way back, switch on the fixed releases of deactivated culprits first
(`fleet.engine.way_back`). Each break is told at once through the run's outbox (`orchestration.night_alerts`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from prefect import task

from fleet.engine.containment import TonightsBreaks
from fleet.engine.probe_after_step import probe_and_contain
from fleet.engine.site_probe import ProbeResult
from fleet.engine.visual_watch import VisualWatch
from fleet.engine.way_back import switch_on_fixed_releases
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Containment, UpdateType
from fleet.rules.execution import CallResult, JobOutcome
from fleet.rules.plan import PlanItem, SiteRecord
from fleet.rules.policy import Policy
from orchestration.night_alerts import NightOutbox
from orchestration.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


@task(name="probe-after-step", **STEP_OPTIONS)
async def probe_and_contain_task(
    client: DashboardClient, before: dict[int, ProbeResult], sites: list[SiteRecord], step: UpdateType,
    sent: list[PlanItem], breaks: TonightsBreaks, policy: Policy, run_id: str, settings: PipelineSettings,
    watch: VisualWatch | None = None,
) -> dict[int, Containment]:
    """`probe_and_contain`, each break told through this run's outbox."""
    return await probe_and_contain(client, before, sites, step, sent, breaks, policy, run_id, settings, watch,
                                   outbox=NightOutbox())


@task(name="switch-on-fixed-releases", **STEP_OPTIONS)
async def switch_on_fixed_releases_task(
    client: DashboardClient, sent: list[PlanItem], calls: list[CallResult], jobs: list[JobOutcome],
    breaks: TonightsBreaks, sites: list[SiteRecord], run_id: str = "", report_dir: Path = Path("."),
) -> list[PlanItem]:
    """`switch_on_fixed_releases`, a release that cannot be switched on told through this run's outbox."""
    return await switch_on_fixed_releases(client, sent, calls, jobs, breaks, sites, run_id, report_dir,
                                          outbox=NightOutbox())
