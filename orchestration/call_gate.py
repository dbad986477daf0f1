"""The gate a step's batch calls pass in a Prefect run (`fleet.engine.batch_calls.CallGate`), built by the task that
runs the step: the engine imports no Prefect."""

from __future__ import annotations

from fleet.engine.batch_calls import CallGate
from orchestration.limits import write_slot
from orchestration.progress import step_logger
from orchestration.retries import FATAL_ERRORS
from orchestration.serve_stop import call_in_flight


def call_gate() -> CallGate:
    """This run's: its logger, the safe point of `fleet serve`'s stop, the errors that end it, its write slots."""
    return CallGate(log=step_logger(), call_in_flight=call_in_flight, fatal=FATAL_ERRORS, write_slot=write_slot)
