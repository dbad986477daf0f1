"""Step 2 as tasks: the fleet as the dashboard knows it, and the updates it offers (`fleet.engine.detection`)."""

from __future__ import annotations

from prefect import task

from fleet.engine.detection import detect_updates, load_fleet
from orchestration.retries import STEP_OPTIONS

load_fleet_task = task(load_fleet, name="load-fleet", **STEP_OPTIONS)
detect_updates_task = task(detect_updates, name="detect-updates", **STEP_OPTIONS)
