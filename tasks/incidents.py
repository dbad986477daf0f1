"""Step after the summary, as a task: the incidents across nights (`fleet.engine.incident_review`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from fleet.engine.incident_review import review_incidents
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Incident, Summary
from fleet.pacing.call_sizing import CallSizer
from fleet.rules.plan import SiteRecord
from orchestration.call_gate import call_gate
from orchestration.night_alerts import NightOutbox
from orchestration.retries import STEP_OPTIONS

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


@task(name="review-incidents", **STEP_OPTIONS)
async def review_incidents_task(
    client: DashboardClient, summary: Summary, sites: list[SiteRecord], settings: PipelineSettings,
    sizer: CallSizer | None = None, *, look: bool = True,
) -> list[Incident]:
    """`review_incidents`, its checks through this run's gate and its alerts through its outbox."""
    return await review_incidents(client, summary, sites, settings, sizer, look=look, gate=call_gate(),
                                  outbox=NightOutbox())
