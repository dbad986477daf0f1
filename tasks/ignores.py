"""Step 3 as a task: the dashboard's ignore lists (`fleet.engine.detection.load_ignores`)."""

from __future__ import annotations

from prefect import task

from fleet.engine.detection import load_ignores
from orchestration.retries import STEP_OPTIONS

load_ignores_task = task(load_ignores, name="load-ignore-lists", **STEP_OPTIONS)
