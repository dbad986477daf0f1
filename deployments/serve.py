"""Deployments served by one process (`fleet serve`): the nightly schedule, the security runs between nights, and
the manual triggers.

Every write call to the dashboard occupies a slot of one Prefect global concurrency limit, so two runs (a
scheduled night and a manual trigger, or two triggers) never push one dashboard harder than
`FLEET_CONCURRENCY` requests together; each deployment also runs one flow run at a time and queues the next.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
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
from prefect.runner import _starter_engine as engine_starter
from prefect.schedules import Cron, Interval, Schedule
from pydantic import Field, field_validator

from dashboard.home import FleetSettings
from deployments.automations import ensure_automations
from deployments.catch_up import catch_up, last_scheduled_night, runs_left_behind
from deployments.console import HANDLER as ONE_LINE_FAILURES
from deployments.stopping import StopReport, StopSignals, run_until_stopped, say_stopped, stop_serving
from fleet.rules.windows import known_zone
from flows.check import check_fleet
from flows.nightly import nightly_maintenance
from flows.report import report
from flows.security import patch_vulnerabilities
from flows.sync import sync_fleet
from flows.update import update_fleet
from orchestration.limits import ensure_concurrency_limit

_start_process = engine_starter.run_process
PREFECT_ENGINE = ["-m", "prefect.engine"]
FLOW_RUN_PROCESS = ["-m", "deployments.flow_run_process"]  # the engine, unless fleet serve stopped meanwhile


async def _run_in_a_session_of_its_own(command: list[str], **kwargs: Any) -> Any:
    """Start a flow run's process out of `fleet serve`'s process group, as `deployments.flow_run_process`: a
    Ctrl-C at its terminal (or a signal to its group) is `fleet serve`'s to handle, and it stops its runs itself
    (reaching a run's process, it killed the night, or printed a KeyboardInterrupt traceback into `fleet serve`'s
    output). Prefect's engine starter reads `run_process` from its module so that it can be replaced (its
    docstring), and starts a new session itself only on request (`isolate_process_group`), which the Runner never
    makes.

    The new process leaves the group only once it runs (its first step after the fork): a stop signal to the group
    in between reached it, before it could hear one, and it died Crashed (seen once in a loaded suite). So
    `fleet serve` holds SIGINT and SIGTERM from before the fork until the process is made (Prefect then hands it
    over): the process starts with them held too, as pending, until it can hear them (`flow_run_process`)."""
    if command[1:] == PREFECT_ENGINE:
        command = [command[0], *FLOW_RUN_PROCESS]
    handler = kwargs.pop("task_status_handler", None)
    if kwargs.get("task_status") is None:  # no hand-over to hear the signals again at: not held
        return await _start_process(command, start_new_session=True, task_status_handler=handler, **kwargs)
    held = SignalsHeldForAFork()

    def made(process: Any) -> Any:
        held.release()
        return handler(process) if handler is not None else process.pid

    try:
        return await _start_process(command, start_new_session=True, task_status_handler=made, **kwargs)
    finally:
        held.release()  # a process that could not be started


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


class SignalsHeldForAFork:
    """`fleet serve`'s SIGINT and SIGTERM held (blocked, pending) from now until `release()`, however many forks
    overlap: they reach `fleet serve` once the last of them is made."""

    holding = 0

    def __init__(self) -> None:
        if not SignalsHeldForAFork.holding:
            signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        SignalsHeldForAFork.holding += 1
        self.released = False

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        SignalsHeldForAFork.holding -= 1
        if not SignalsHeldForAFork.holding:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


engine_starter.run_process = _run_in_a_session_of_its_own

ONE_AT_A_TIME = ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE)
TAGS = ["fleet-maintenance"]
NIGHTLY = "nightly"  # the nightly deployment's name
SECURITY = "security"  # the security deployment's name


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
    security_runs: bool = Field(True, description="Serve the security deployment: between nights, the fixes of known "
                                "vulnerabilities at or above the policy's threshold applied at once (false: they "
                                "wait for the night).")
    security_interval_seconds: float = Field(
        3600, ge=30, description="How often the security deployment looks for fixes between nights.")
    security_cron: str | None = Field(
        None, description="Or a cron expression for it (read in FLEET_SCHEDULE_TIMEZONE), instead of the interval.")
    stop_grace_seconds: float = Field(
        120, ge=0, description="Stopping `fleet serve`: how long a run under way gets to reach a safe point between "
        "calls (its calls in flight answered and journalled) before it is cancelled mid-call. systemd's "
        "TimeoutStopSec must leave room for it: this plus 60 s.")
    catch_up_hours: float = Field(
        12, ge=0, description="Starting `fleet serve`: the last scheduled night, missed, cancelled by a stop or "
        "killed, runs once at once, unless the next is due within this many hours (0: always).")
    concurrency_limit: str = Field("fleet-dashboard", description="Prefect global concurrency limit name.")
    concurrency: int = Field(8, ge=1, le=256, description="Dashboard write calls in flight across all runs.")

    @field_validator("schedule_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return known_zone(value)

    @field_validator("schedule_cron", "security_cron")
    @classmethod
    def _five_fields(cls, value: str | None) -> str | None:
        if value is not None and len(value.split()) != 5:
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

    def security_schedule(self) -> Schedule:
        if self.security_cron:
            return Cron(self.security_cron, timezone=self.schedule_timezone)
        return Interval(timedelta(seconds=self.security_interval_seconds), timezone=self.schedule_timezone)

    def describe_security(self) -> str:
        if self.security_cron:
            return f"cron {self.security_cron!r} in {self.schedule_timezone}"
        return f"every {self.security_interval_seconds:g} s"

    def described(self, deployment: str) -> str:
        """The schedule of a served deployment, as `fleet serve` says it."""
        return self.describe_security() if deployment == SECURITY else self.describe()


async def build_deployments(settings: ScheduleSettings) -> list[RunnerDeployment]:
    """The nightly deployment on its schedule, the security deployment on its own (unless turned off), and the four
    manual triggers."""
    security = [await patch_vulnerabilities.ato_deployment(
        name=SECURITY,
        schedules=[settings.security_schedule()],
        concurrency_limit=ONE_AT_A_TIME,
        description="Between nights: the updates that fix a known vulnerability at or above the policy's threshold, "
                    "on the sites offered one, applied now under the night lock (nothing else).",
        tags=TAGS,
    )] if settings.security_runs else []
    return [
        await nightly_maintenance.ato_deployment(
            name=NIGHTLY,
            schedules=[settings.schedule()],
            concurrency_limit=ONE_AT_A_TIME,
            description="The whole night: sync, detect, policy, update by type, checks, reconcile, report.",
            tags=TAGS,
        ),
        *security,
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
                         poll: float = 2.0, recheck: float = 3600.0, described: str | None = None) -> None:
    """Say when the night runs next, as the server scheduled it; say loudly when it has scheduled nothing (its
    scheduler off or failing, the schedule paused): a served deployment that never runs looks just like one
    that waits for 2 a.m. Checked again every hour while serving."""
    zone = ZoneInfo(settings.schedule_timezone)
    described = described or settings.describe()
    waited, warned = 0.0, False
    while True:
        starts = await upcoming_runs(deployment_id)
        if starts:
            times = ", ".join(f"{start.astimezone(zone):%Y-%m-%d %H:%M %Z}" for start in starts)
            say(f"{name}: next runs {times} ({described})", False)
            waited, warned = 0.0, False
            await asyncio.sleep(recheck)
            continue
        if waited >= settings.schedule_check_seconds and not warned:
            say(f"WARNING: the Prefect server has scheduled no run of {name} in {waited:.0f} s: nothing will run "
                f"({described}). Is the schedule paused in the UI, or the server's scheduler service off "
                "(PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED) or failing (see the server's log)?", True)
            warned = True
        await asyncio.sleep(poll)
        waited += poll


class ServiceRunner(Runner):
    """Prefect's runner, stopped by `fleet serve` itself: Prefect's own SIGTERM handler calls `sys.exit` from inside
    the event loop, which can leave the process without pausing the schedules. Replacing it changes only the
    Python function the signal calls: the event loop still hears SIGTERM (through its wakeup file, as every
    signal) and calls `fleet serve`'s own handler, once."""

    def __init__(self) -> None:
        super().__init__(pause_on_shutdown=True)

    def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
        pass


async def serve_and_watch(deployments: list[RunnerDeployment], settings: ScheduleSettings,
                          say: Callable[[str, bool], None]) -> StopReport:
    """Register the deployments (first, the runs a killed `fleet serve` left behind marked Crashed; then the last
    night run once if it was missed, cancelled by a stop, or killed), run their flow runs here, and watch that the
    scheduled ones get runs, until SIGINT or SIGTERM; then stop as `deployments.stopping` says, whatever moment the
    signal came at (a registration, a run's submission, a night under way)."""
    loop = asyncio.get_running_loop()
    stop = StopSignals()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.received)
    os.environ.update(stop.environment())  # for the runs' processes
    runner = ServiceRunner()
    served: dict[UUID, str] = {}
    watches: list[asyncio.Task[None]] = []
    cut: set[UUID] = set()
    try:
        started = datetime.now(UTC)
        for line in await runs_left_behind([f"{deployment.flow_name}/{deployment.name}" for deployment in deployments],
                                           started):
            say(line, False)
        last = await last_scheduled_night(nightly_maintenance.name, NIGHTLY, started)
        for deployment in deployments:
            if stop.first.is_set():
                break
            deployment_id = await runner.aadd_deployment(deployment)
            name = f"{deployment.flow_name}/{deployment.name}"
            served[deployment_id] = name
            say(f"serving {name}" + (" on its schedule" if deployment.schedules else " (manual trigger)"), False)
            if deployment.schedules:
                watches.append(asyncio.create_task(watch_schedule(name, deployment_id, settings, say,
                                                                  described=settings.described(deployment.name))))
        nightly = next((deployment_id for deployment_id, name in served.items()
                        if name == f"{nightly_maintenance.name}/{NIGHTLY}"), None)
        if last is not None and nightly is not None and not stop.first.is_set():
            await catch_up(nightly, served[nightly], last, settings.catch_up_hours, datetime.now(UTC), say)
        if not stop.first.is_set():
            cut = await run_until_stopped(runner, stop, settings.stop_grace_seconds, say)
    finally:
        for watch in watches:
            watch.cancel()
        report = await stop_serving(served, cut, stop.at)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        stop.close()
        say_stopped(report, say)
    return report


def serve_deployments(settings: ScheduleSettings, say: Callable[[str, bool], None]) -> StopReport:
    """Register the deployments and run their flow runs in this process until stopped (SIGINT, SIGTERM)."""

    async def prepare() -> list[RunnerDeployment]:
        await ensure_concurrency_limit(settings.concurrency_limit, settings.concurrency)
        for line in await ensure_automations():  # FLEET_NOTIFY_BLOCK, FLEET_KILL_SWITCH_*, ... (AutomationSettings)
            say(line, False)
        return await build_deployments(settings)

    deployments = asyncio.run(prepare())
    os.environ["FLEET_CONCURRENCY_LIMIT"] = settings.concurrency_limit
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_CLASS", ONE_LINE_FAILURES)  # for the runs' processes
    return asyncio.run(serve_and_watch(deployments, settings, say))
