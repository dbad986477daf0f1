"""Step 5: fix the plan (cohorts of the staged rollout) and write it beside the summary before anything runs."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from fleet.rules.plan import Plan
from fleet.rules.policy import Rollout
from fleet.rules.rollout import assign_cohorts
from orchestration.retries import STEP_OPTIONS

PLAN_FILE = "plan.json"


async def finalise_plan(plan: Plan, rollout: Rollout | None, run_dir: Path) -> Plan:
    """Async like the flows that call it: a sync task run there opens a Prefect client of its own."""
    plan = assign_cohorts(plan, rollout)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / PLAN_FILE).write_text(plan.model_dump_json(indent=1))
    return plan


finalise_plan_task = task(finalise_plan, name="plan", **STEP_OPTIONS)
