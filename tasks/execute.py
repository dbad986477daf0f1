"""Step 6 as a task: apply one update type in calls sized by time (`fleet.engine.execution`)."""

from __future__ import annotations

from prefect import task

from fleet.engine.execution import execute_updates
from orchestration.call_gate import call_gate
from orchestration.retries import STEP_OPTIONS
from orchestration.run_handles import with_run_handles

execute_updates_task = task(with_run_handles(execute_updates, gate=call_gate), name="execute-updates",
                            **STEP_OPTIONS)
