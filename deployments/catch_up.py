"""When `fleet serve` starts: the runs an earlier one left behind, and the night it missed, run once.

A night is missed when `fleet serve` was not running at its time (a reboot, a deploy, `systemctl restart` at 2 a.m.),
cancelled when a stop came before it ran or at one of its safe points, killed when its process died (with a
`fleet serve` that was killed itself). As anacron or systemd's `Persistent=true` do, `fleet serve` then runs the
last scheduled night once, saying why, unless the next one is due within `FLEET_CATCH_UP_HOURS`. A night a person
cancelled is theirs: it is not run again. The journal of the night that was stopped or killed stays open, and the
catch-up accounts for what it applied (`fleet.engine.interrupted`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterId,
    FlowRunFilter,
    FlowRunFilterExpectedStartTime,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import Deployment, FlowRun, StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.exceptions import ObjectNotFound
from prefect.states import Cancelled, Crashed, Scheduled

from orchestration.serve_stop import CANCELLED_BY_THE_STOP

LEFT_BEHIND = (StateType.PENDING, StateType.RUNNING, StateType.CANCELLING)
WILL_RUN_OR_RAN = {StateType.SCHEDULED, StateType.PENDING, StateType.RUNNING, StateType.PAUSED,
                   StateType.CANCELLING, StateType.COMPLETED, StateType.FAILED}
CATCH_UP_TAG = "catch-up"
ANCHORED_BEFORE = timedelta(minutes=1)
LOOKBACKS = [timedelta(hours=4**power) for power in range(8)]  # 1 h ... 4096 h (170 days): any schedule's last date


@dataclass(frozen=True)
class LastNight:
    """When the nightly deployment was last due, by its schedule as the server kept it before this start."""

    due: datetime
    zone: str


def dated(deployment: Deployment) -> Any:
    """The deployment's schedule as the server dates it (its time zone, DST); None without one."""
    from prefect.server.schemas import schedules

    kept = next((entry.schedule for entry in deployment.schedules), None)
    return None if kept is None else getattr(schedules, type(kept).__name__).model_validate(kept.model_dump())


async def last_scheduled_night(flow: str, deployment: str, now: datetime) -> LastNight | None:
    """The deployment's last due time before `now`, read before this start registers it (and its schedule anew);
    None for a deployment registered after it (a first start)."""
    async with get_client() as client:
        try:
            found = await client.read_deployment_by_name(f"{flow}/{deployment}")
        except ObjectNotFound:
            return None
    schedule = dated(found)
    if schedule is None or found.created is None:
        return None
    for lookback in LOOKBACKS:
        dates = await schedule.get_dates(n=1000, start=now - lookback, end=now)
        if dates:
            due = datetime.fromtimestamp(dates[-1].timestamp(), UTC)
            # an interval's anchor is the moment its schedule was made, just before the deployment was
            return LastNight(due, schedule.timezone or "UTC") if due >= found.created - ANCHORED_BEFORE else None
    return None


async def runs_left_behind(names: list[str], now: datetime) -> list[str]:
    """The runs of the deployments `fleet serve` is about to serve still Pending, Running or Cancelling as it starts
    (since before `now`): their processes ended with the `fleet serve` that ran them, killed before it could stop
    them. Marked Crashed (no hook runs: no alert), which frees their deployment for its next run; one line each."""
    said = []
    async with get_client() as client:
        for name in names:
            try:
                deployment = await client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            runs = await client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
                flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(
                    any_=list(LEFT_BEHIND)))))
            for run in runs:
                if run.state is None or run.state.timestamp >= now:
                    continue
                what = "before it started" if run.state_type is StateType.PENDING else "while it ran"
                message = (f"its process ended {what}, with the `fleet serve` running it, which was killed (its "
                           "runs die with it); found when fleet serve started again")
                await client.set_flow_run_state(run.id, Crashed(message=message), force=True)
                said.append(f"run {run.name} ({name}) marked Crashed: {message}")
    return said


def why_it_did_not_run(runs: list[FlowRun]) -> str | None:
    """What became of a night whose runs neither ran nor will: None when it ran, will run, or a person cancelled it."""
    if any(run.state_type in WILL_RUN_OR_RAN for run in runs):
        return None
    if not runs:
        return "missed (fleet serve was not running then)"
    last = runs[-1]
    message = (last.state.message if last.state else "") or ""
    if last.state_type is StateType.CRASHED:
        return "killed (Crashed: its process ended before the night did)"
    if message.startswith(CANCELLED_BY_THE_STOP):
        return CANCELLED_BY_THE_STOP
    return None


async def catch_up(deployment_id: UUID, name: str, last: LastNight, window_hours: float, now: datetime,
                   say: Callable[[str, bool], None]) -> FlowRun | None:
    """Run the last scheduled night once if it was missed, cancelled by a stop, or killed; older nights left
    Scheduled while nobody served them are cancelled (a night runs once, not once per night missed)."""
    zone = ZoneInfo(last.zone)
    when = f"{last.due.astimezone(zone):%Y-%m-%d %H:%M{':%S' if last.due.second else ''} %Z}"
    async with get_client() as client:
        mine = DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
        stale = await client.read_flow_runs(deployment_filter=mine, flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])),
            expected_start_time=FlowRunFilterExpectedStartTime(before_=last.due - timedelta(seconds=1))))
        for run in stale:
            await client.set_flow_run_state(run.id, Cancelled(
                message=f"not run before fleet serve stopped: superseded by the night of {when}"), force=True)
            say(f"{name}: run {run.name}, due {run.expected_start_time:%Y-%m-%d %H:%M} UTC, cancelled: superseded "
                f"by the night of {when} (a missed night runs once)", False)
        since = await client.read_flow_runs(deployment_filter=mine, flow_run_filter=FlowRunFilter(  # not the new ones
            expected_start_time=FlowRunFilterExpectedStartTime(after_=last.due, before_=now)),
            sort=FlowRunSort.EXPECTED_START_TIME_ASC)
        why = why_it_did_not_run(since)
        if why is None:
            return None
        schedule = dated(await client.read_deployment(deployment_id))  # as registered now
        upcoming = await schedule.get_dates(n=1, start=now + timedelta(seconds=1)) if schedule is not None else []
        following = datetime.fromtimestamp(upcoming[0].timestamp(), UTC) if upcoming else None
        if following is not None and following - now <= timedelta(hours=window_hours):
            say(f"{name}: the night of {when} was {why}; not run now: the next is due "
                f"{following.astimezone(zone):%Y-%m-%d %H:%M %Z}, within FLEET_CATCH_UP_HOURS "
                f"({window_hours:g} h)", False)
            return None
        reason = f"catch-up: the night of {when} was {why}"
        run = await client.create_flow_run_from_deployment(deployment_id, state=Scheduled(message=reason),
                                                           tags=[CATCH_UP_TAG])
    say(f"{name}: the night of {when} was {why}: running it once now as run {run.name} (catch-up; "
        f"FLEET_CATCH_UP_HOURS={window_hours:g})", False)
    return run

