"""Deployments served by one process (`fleet serve`): the nightly schedule and the manual triggers.

Every write call to the dashboard occupies a slot of one Prefect global concurrency limit, so two runs (a
scheduled night and a manual trigger, or two triggers) never push one dashboard harder than
`FLEET_CONCURRENCY` requests together; each deployment also runs one flow run at a time and queues the next.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID
from zoneinfo import ZoneInfo

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterId,
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy, StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.deployments.runner import RunnerDeployment
from prefect.runner import Runner
from prefect.schedules import Cron, Interval, Schedule
from pydantic import Field, field_validator

from dashboard.home import FleetSettings
from deployments.automations import ensure_automations
from fleet.rules.windows import known_zone
from flows.check import check_fleet
from flows.nightly import nightly_maintenance
from flows.report import report
from flows.sync import sync_fleet
from flows.update import update_fleet
from tasks.limits import ensure_concurrency_limit

ONE_AT_A_TIME = ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE)
TAGS = ["fleet-maintenance"]


class ScheduleSettings(FleetSettings):
    """When the nightly run starts, and the limit that keeps runs from piling onto one dashboard."""

    schedule_cron: str = Field("0 2 * * *", description="Cron expression of the nightly run.")
    schedule_timezone: str = Field("UTC", description="IANA time zone the cron expression is read in.")
    schedule_interval_seconds: float | None = Field(
        None, ge=30, description="Run the night every this many seconds instead of on the cron expression (a soak, "
        "a test bed).")
    schedule_check_seconds: float = Field(
        120, gt=0, description="How long `fleet serve` waits for the Prefect server to schedule the night's first "
        "runs before it warns that nothing will run (the server's scheduler loops every 60 s by default).")
    concurrency_limit: str = Field("fleet-dashboard", description="Prefect global concurrency limit name.")
    concurrency: int = Field(8, ge=1, le=256, description="Dashboard write calls in flight across all runs.")

    @field_validator("schedule_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return known_zone(value)

    @field_validator("schedule_cron")
    @classmethod
    def _five_fields(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError(f"cron expression {value!r} must have five fields (minute hour day month weekday)")
        return value


    def schedule(self) -> Schedule:
        if self.schedule_interval_seconds:
            return Interval(timedelta(seconds=self.schedule_interval_seconds), timezone=self.schedule_timezone)
        return Cron(self.schedule_cron, timezone=self.schedule_timezone)

    def describe(self) -> str:
        if self.schedule_interval_seconds:
            return f"every {self.schedule_interval_seconds:g} s"
        return f"cron {self.schedule_cron!r} in {self.schedule_timezone}"


async def build_deployments(settings: ScheduleSettings) -> list[RunnerDeployment]:
    """The nightly deployment on its schedule plus the four manual triggers."""
    return [
        await nightly_maintenance.ato_deployment(
            name="nightly",
            schedules=[settings.schedule()],
            concurrency_limit=ONE_AT_A_TIME,
            description="The whole night: sync, detect, policy, update by type, checks, reconcile, report.",
            tags=TAGS,
        ),
        await update_fleet.ato_deployment(
            name="update_fleet",
            concurrency_limit=ONE_AT_A_TIME,
            description="Apply the policy's updates to selected sites now (manual trigger).",
            tags=TAGS,
        ),
        await sync_fleet.ato_deployment(
            name="sync_fleet",
            concurrency_limit=ONE_AT_A_TIME,
            description="Sync selected sites with the dashboard now, nothing else (manual trigger).",
            tags=TAGS,
        ),
        await check_fleet.ato_deployment(
            name="check_fleet",
            concurrency_limit=ONE_AT_A_TIME,
            description="Check selected sites: dashboard check, home-page probe, open incidents (manual trigger).",
            tags=TAGS,
        ),
        await report.ato_deployment(
            name="report",
            description="Render (and send) the reports of a past run from its summary.json (manual trigger).",
            tags=TAGS,
        ),
    ]


async def upcoming_runs(deployment_id: UUID, count: int = 3) -> list[datetime]:
    """When the server has scheduled the deployment's next runs (none: nothing will run)."""
    async with get_client() as client:
        runs = await client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
                any_=[StateType.SCHEDULED]))),
            sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=count)
    return [run.expected_start_time for run in runs if run.expected_start_time is not None]


async def watch_schedule(name: str, deployment_id: UUID, settings: ScheduleSettings, say: Callable[[str, bool], None],
                         poll: float = 2.0, recheck: float = 3600.0) -> None:
    """Say when the night runs next, as the server scheduled it; say loudly when it has scheduled nothing (its
    scheduler off or failing, the schedule paused): a served deployment that never runs looks just like one
    that waits for 2 a.m. Checked again every hour while serving."""
    zone = ZoneInfo(settings.schedule_timezone)
    waited, warned = 0.0, False
    while True:
        starts = await upcoming_runs(deployment_id)
        if starts:
            times = ", ".join(f"{start.astimezone(zone):%Y-%m-%d %H:%M %Z}" for start in starts)
            say(f"{name}: next runs {times} ({settings.describe()})", False)
            waited, warned = 0.0, False
            await asyncio.sleep(recheck)
            continue
        if waited >= settings.schedule_check_seconds and not warned:
            say(f"WARNING: the Prefect server has scheduled no run of {name} in {waited:.0f} s: nothing will run "
                f"({settings.describe()}). Is the schedule paused in the UI, or the server's scheduler service off "
                "(PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED) or failing (see the server's log)?", True)
            warned = True
        await asyncio.sleep(poll)
        waited += poll


async def serve_and_watch(deployments: list[RunnerDeployment], settings: ScheduleSettings,
                          say: Callable[[str, bool], None]) -> None:
    """Register the deployments, run their flow runs here, and watch that the scheduled ones get runs."""
    runner = Runner(pause_on_shutdown=True)
    watches = []
    for deployment in deployments:
        deployment_id = await runner.aadd_deployment(deployment)
        name = f"{deployment.flow_name}/{deployment.name}"
        say(f"serving {name}" + (" on its schedule" if deployment.schedules else " (manual trigger)"), False)
        if deployment.schedules:
            watches.append(asyncio.create_task(watch_schedule(name, deployment_id, settings, say)))
    try:
        await runner.start()
    finally:
        for watch in watches:
            watch.cancel()


def serve_deployments(settings: ScheduleSettings, say: Callable[[str, bool], None]) -> None:
    """Register the deployments and run their flow runs in this process until interrupted."""

    async def prepare() -> list[RunnerDeployment]:
        await ensure_concurrency_limit(settings.concurrency_limit, settings.concurrency)
        for line in await ensure_automations():  # FLEET_NOTIFY_BLOCK, FLEET_KILL_SWITCH_*, ... (AutomationSettings)
            say(line, False)
        return await build_deployments(settings)

    deployments = asyncio.run(prepare())
    os.environ["FLEET_CONCURRENCY_LIMIT"] = settings.concurrency_limit
    asyncio.run(serve_and_watch(deployments, settings, say))
