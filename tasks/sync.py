"""Step 1 as tasks: sync the selected sites (`fleet.engine.sync`), and read MainWP's limits on its calls to child
sites (`fleet.engine.child_limits`)."""

from __future__ import annotations

from prefect import task

from fleet.engine.child_limits import read_child_slots
from fleet.engine.sync import sync_sites
from orchestration.call_gate import call_gate
from orchestration.progress import step_logger
from orchestration.retries import STEP_OPTIONS
from orchestration.run_handles import with_run_handles

sync_sites_task = task(with_run_handles(sync_sites, gate=call_gate), name="sync-sites", **STEP_OPTIONS)
read_child_slots_task = task(with_run_handles(read_child_slots, log=step_logger), name="read-child-limits",
                             **STEP_OPTIONS)
