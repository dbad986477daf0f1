"""Step 4: decide every detected and ignored item against the policy (with first-seen dates for minimum age),
and hold the versions earlier nights remembered as bad, and those MainWP remembers WordPress rolled back."""

from __future__ import annotations

from dataclasses import replace

from prefect import task

from fleet.model.settings import PipelineSettings
from fleet.rules.holds import hold_remembered, hold_rolled_back, night_evidence, pick_canaries
from fleet.rules.plan import Plan, PlanRequest, build_plan
from fleet.state.first_seen import FirstSeenStore
from fleet.state.holds import HoldStore
from fleet.state.incidents import IncidentStore
from orchestration.retries import STEP_OPTIONS


async def apply_policy(request: PlanRequest, settings: PipelineSettings) -> Plan:
    """Async like the flows that call it: a sync task run there opens a Prefect client of its own. The request's
    first-seen dates are the store's, recorded here (a release new tonight is first seen today)."""
    first_seen = FirstSeenStore(settings.state_path).record(
        (update.release for update in request.pending), request.created_at.date()
    )
    plan = build_plan(replace(request, first_seen=first_seen))
    store = HoldStore(settings.state_path)
    incidents = IncidentStore(settings.state_path)
    evidence = night_evidence(plan, request.sites, request.selection, incidents.open_incidents(),
                              incidents.listed(include_closed=True), request.policy, request.created_at)
    if not request.dry_run:  # a dry run neither ends holds nor counts their days
        store.weigh(evidence)
    holds = store.active()
    canaries = pick_canaries(plan.items, holds, evidence.cleared)
    if not request.dry_run:
        store.start_canaries(canaries, request.run_id)
    plan.items = hold_remembered(hold_rolled_back(plan.items, request.pending), holds, canaries)
    return plan


apply_policy_task = task(apply_policy, name="apply-policy", **STEP_OPTIONS)
