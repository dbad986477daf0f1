"""Before a lane's first update, as a task: the baseline shots (`fleet.engine.visual_watch.take_baselines`)."""

from __future__ import annotations

from prefect import task

from fleet.engine.visual_watch import take_baselines
from orchestration.retries import STEP_OPTIONS

take_baselines_task = task(take_baselines, name="visual-baselines", **STEP_OPTIONS)
