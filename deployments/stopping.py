"""How `fleet serve` stops, at whatever moment SIGINT or SIGTERM comes: no new run; the runs under way told, and
given a grace to reach a safe point between calls; every schedule paused and read back; nothing left Pending.

A run not started yet is cancelled before it runs; a run under way stops at its next safe point
(`orchestration.serve_stop`): its calls in flight answered and journalled, its state Cancelled, its journal open for the
next run to account for. One still under way after `FLEET_STOP_GRACE_SECONDS` (a call that outlasts it, a wait for
an approval) is cancelled as Prefect cancels a run, mid-call: its journal, written before each call is sent, still
tells the next run what it sent. Every such run is said Cancelled "by the stop of `fleet serve`", never Crashed,
and sends no alert; `fleet serve`'s next start runs the night it cost once (`deployments.catch_up`). A second
signal cuts the grace short.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    DeploymentFilter,
    DeploymentFilterId,
    FlowRunFilter,
    FlowRunFilterState,
    FlowRunFilterStateType,
)
from prefect.client.schemas.objects import StateType
from prefect.runner import Runner
from prefect.states import Cancelled

from fleet.model.vocabulary import count
from orchestration.serve_stop import BEFORE_IT_STARTED, CANCELLED_BY_THE_STOP, STOP_FILE

STOP_SECONDS = 60.0  # for the runner to stop, then for the server to take the pauses: beyond, said loudly
AFTER_THE_GRACE = (f"{CANCELLED_BY_THE_STOP} after its grace (FLEET_STOP_GRACE_SECONDS), mid-call: the next run "
                   "accounts for what it sent")


class StopSignals:
    """SIGINT and SIGTERM as `fleet serve` hears them: the first stops it, a second cuts the runs' grace short.
    The stop is also a file its runs' processes look at (`FLEET_STOP_FILE`, set in this process's environment
    for them)."""

    def __init__(self) -> None:
        self.first = asyncio.Event()
        self.again = asyncio.Event()
        self.folder = Path(tempfile.mkdtemp(prefix="fleet-serve-"))
        self.file = self.folder / "stop"
        self.at: datetime | None = None

    def environment(self) -> dict[str, str]:
        return {STOP_FILE: str(self.file)}

    def received(self) -> None:
        if self.first.is_set():
            self.again.set()
        else:
            self.at = datetime.now(UTC)
            self.first.set()

    def tell_the_runs(self) -> None:
        self.file.touch()

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class StopReport:
    """What stopping `fleet serve` left: the deployments paused, those that could not be (and why), the runs the
    stop cancelled (those that had not started and those it stopped under way)."""

    paused: list[str] = field(default_factory=list)
    not_paused: list[str] = field(default_factory=list)  # "name: why"
    cancelled: list[str] = field(default_factory=list)  # "run name (deployment): how"

    @property
    def complete(self) -> bool:
        return not self.not_paused


def runs_under_way(runner: Runner) -> set[UUID]:
    """The flow runs the runner is handling: submitted (Pending, their process starting) or running. Read from
    Prefect's poller (Prefect 3.8): a run leaves this set when its process has exited."""
    poller = getattr(runner, "_scheduled_run_poller", None)
    return set(getattr(poller, "_submitting_flow_run_ids", ()))


async def run_until_stopped(runner: Runner, stop: StopSignals, grace: float,
                            say: Callable[[str, bool], None]) -> set[UUID]:
    """Run the runner until it ends by itself or the first signal; then stop it. Returns the runs cut after
    their grace."""
    serving = asyncio.create_task(runner.start())
    stopping = asyncio.create_task(stop.first.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if serving.done():
        serving.result()  # the runner ended by itself: its error is fleet serve's
        return set()
    say("stopping: no new run; pausing the schedules", False)
    while not runner.started and not serving.done():  # a signal in the runner's first moments
        await asyncio.sleep(0.05)
    poller = getattr(runner, "_scheduled_run_poller", None)
    if poller is not None:
        poller.stopping = True  # as Runner.astop does first; its cancelling the runs waits for their grace
    stop.tell_the_runs()
    cut = await grace_for_the_runs(runner, stop, grace, say)
    if not serving.done():
        await runner.astop()  # cancels what is left as Prefect cancels a run (its engine told, then SIGTERM)
    try:
        await asyncio.wait_for(serving, STOP_SECONDS + 30)  # Prefect gives a cancelled run 30 s before SIGKILL
    except Exception as error:  # noqa: BLE001 - the schedules are paused (or said not to be) all the same
        say(f"the runner did not stop cleanly: {type(error).__name__}: {error}", True)
    return cut


async def grace_for_the_runs(runner: Runner, stop: StopSignals, grace: float,
                             say: Callable[[str, bool], None]) -> set[UUID]:
    """Wait until the runs under way have ended (at a safe point, or before they started), at most `grace`
    seconds or until a second signal; the runs still under way then."""
    await asyncio.sleep(0.2)  # a submission the signal came in the middle of: its process is starting
    under_way = runs_under_way(runner)
    if not under_way:
        return set()
    say(f"stopping: {count(len(under_way), 'run')} under way: up to {grace:g} s (FLEET_STOP_GRACE_SECONDS) to "
        "reach a safe point between calls; stop again to cancel at once", False)
    deadline = asyncio.get_running_loop().time() + grace
    while runs_under_way(runner) and not stop.again.is_set() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
    cut = runs_under_way(runner)
    if cut:
        why = "stopped again" if stop.again.is_set() else f"still under way after {grace:g} s"
        say(f"stopping: {count(len(cut), 'run')} {why}: cancelled now, mid-call (the next run accounts for what "
            "was sent)", True)
    return cut


async def stop_serving(served: dict[UUID, str], cut: set[UUID], since: datetime | None) -> StopReport:
    """Pause every served deployment (again: the runner's own pause may not have happened) and read back that it
    is paused; cancel the runs left Pending (submitted, their process never started): nothing would ever start
    them, and a Pending run blocks its deployment's next one; say the runs cut after their grace Cancelled by the
    stop (Prefect's own cancel says only "cancelled"); list the runs the stop cancelled."""
    report = StopReport()
    try:
        async with asyncio.timeout(STOP_SECONDS), get_client() as client:
            for deployment_id, name in served.items():
                try:
                    await client.pause_deployment(deployment_id)
                    paused = (await client.read_deployment(deployment_id)).paused
                except Exception as error:  # noqa: BLE001 - every deployment is tried, each failure said
                    report.not_paused.append(f"{name}: {type(error).__name__}: {error}")
                    continue
                (report.paused if paused else report.not_paused).append(
                    name if paused else f"{name}: the server still reads it active")
            if served:
                mine = DeploymentFilter(id=DeploymentFilterId(any_=list(served)))
                for run in await client.read_flow_runs(deployment_filter=mine, flow_run_filter=FlowRunFilter(
                        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PENDING])))):
                    await client.set_flow_run_state(run.id, Cancelled(message=BEFORE_IT_STARTED), force=True)
                for run_id in cut:
                    run = await client.read_flow_run(run_id)
                    if run.state_type in (StateType.CANCELLED, StateType.CANCELLING, StateType.RUNNING):
                        await client.set_flow_run_state(run_id, Cancelled(message=AFTER_THE_GRACE), force=True)
                if since is not None:
                    report.cancelled = [
                        f"{run.name} ({served.get(run.deployment_id, 'deployment')}): {run.state.message}"
                        for run in await client.read_flow_runs(deployment_filter=mine, flow_run_filter=FlowRunFilter(
                            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.CANCELLED]))))
                        if run.state and run.state.timestamp >= since
                        and (run.state.message or "").startswith(CANCELLED_BY_THE_STOP)]
    except Exception as error:  # noqa: BLE001 - the server gone or too slow: said, never hidden
        done = set(report.paused) | {line.split(":", 1)[0] for line in report.not_paused}
        report.not_paused += [f"{name}: {type(error).__name__}: {error}" for name in served.values()
                              if name not in done]
    return report


def say_stopped(report: StopReport, say: Callable[[str, bool], None]) -> None:
    for run in report.cancelled:
        say(f"run {run}", False)
    for problem in report.not_paused:
        say(f"WARNING: could not pause {problem}: its schedule may still be on and its runs pile up with nobody "
            "to run them; pause it in the Prefect UI or with `prefect deployment schedule pause`", True)
    if report.paused:
        say(f"stopped: {count(len(report.paused), 'deployment')} paused until fleet serve runs again", False)
