"""Before and after tonight's survey, as tasks: the runs that were killed mid-run (`fleet.engine.interrupted_runs`)."""

from __future__ import annotations

from prefect import task

from fleet.engine.interrupted_runs import account_interrupted_runs, wait_for_interrupted_runs
from orchestration.call_gate import call_gate
from orchestration.limits import mark_crashed
from orchestration.night_alerts import NightOutbox
from orchestration.progress import step_logger
from orchestration.retries import STEP_OPTIONS
from orchestration.run_handles import with_run_handles

wait_for_interrupted_runs_task = task(
    with_run_handles(wait_for_interrupted_runs, mark_crashed=lambda: mark_crashed, log=step_logger),
    name="wait-for-interrupted-runs", **STEP_OPTIONS)
account_interrupted_runs_task = task(
    with_run_handles(account_interrupted_runs, gate=call_gate, outbox=NightOutbox),
    name="account-interrupted-runs", **STEP_OPTIONS)
