"""Deployments served by one process (`fleet serve`): the nightly schedule and the manual triggers.

Every write call to the dashboard occupies a slot of one Prefect global concurrency limit, so two runs (a
scheduled night and a manual trigger, or two triggers) never push one dashboard harder than
`FLEET_CONCURRENCY` requests together; each deployment also runs one flow run at a time and queues the next.
"""

from __future__ import annotations

import os

from prefect import serve
from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
from prefect.deployments.runner import RunnerDeployment
from prefect.schedules import Cron
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from fleet.rules.windows import known_zone
from flows.check import check_fleet
from flows.nightly import nightly_maintenance
from flows.report import report
from flows.sync import sync_fleet
from flows.update import update_fleet
from tasks.limits import ensure_concurrency_limit

ONE_AT_A_TIME = ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE)
TAGS = ["fleet-maintenance"]


class ScheduleSettings(BaseSettings):
    """When the nightly run starts, and the limit that keeps runs from piling onto one dashboard."""

    model_config = SettingsConfigDict(env_prefix="FLEET_", env_file=".env", extra="ignore")

    schedule_cron: str = Field("0 2 * * *", description="Cron expression of the nightly run.")
    schedule_timezone: str = Field("UTC", description="IANA time zone the cron expression is read in.")
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


async def build_deployments(settings: ScheduleSettings) -> list[RunnerDeployment]:
    """The nightly deployment on its schedule plus the four manual triggers."""
    return [
        await nightly_maintenance.ato_deployment(
            name="nightly",
            schedules=[Cron(settings.schedule_cron, timezone=settings.schedule_timezone)],
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


def serve_deployments(settings: ScheduleSettings | None = None) -> None:
    """Register the deployments and run their flow runs in this process until interrupted."""
    import asyncio

    settings = settings or ScheduleSettings()

    async def prepare() -> list[RunnerDeployment]:
        await ensure_concurrency_limit(settings.concurrency_limit, settings.concurrency)
        return await build_deployments(settings)

    deployments = asyncio.run(prepare())
    os.environ["FLEET_CONCURRENCY_LIMIT"] = settings.concurrency_limit
    serve(*deployments)


if __name__ == "__main__":
    serve_deployments()
