"""What the night tells outside fleet/ the moment it knows: its Prefect events and the operator's alerts (a break, a
site still down). The engine imports neither Prefect nor the reports: the task that runs a step hands its run's
outbox in (`orchestration.night_alerts.NightOutbox`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from fleet.model.events import FleetEvent
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Containment, Incident
from fleet.rules.plan import PlanItem, SiteRecord

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


class Outbox(Protocol):
    def emit(self, events: Iterable[FleetEvent]) -> None: ...  # never raises: an event must not stop the night

    async def alert_break(self, client: DashboardClient, site: SiteRecord, containment: Containment,
                          applied: list[PlanItem], run_id: str, report_dir: Path) -> object: ...

    async def alert_still_down(self, incident: Incident, run_id: str, dashboard: str, today: date,
                               settings: PipelineSettings) -> None: ...
