"""Step 4: decide every detected and ignored item against the policy (with first-seen dates for minimum age),
and hold the versions earlier nights remembered as bad, and those MainWP remembers WordPress rolled back."""

from __future__ import annotations

from datetime import datetime

from prefect import task

from fleet.engine.vulnerability_review import NightSecurity
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Selection
from fleet.rules.holds import hold_remembered, hold_rolled_back, night_evidence, pick_canaries
from fleet.rules.plan import DetectedUpdate, IgnoreEntry, Plan, SiteRecord, build_plan
from fleet.rules.policy import Policy
from fleet.state.first_seen import FirstSeenStore
from fleet.state.holds import HoldStore
from fleet.state.incidents import IncidentStore
from orchestration.retries import STEP_OPTIONS


async def apply_policy(
    *,
    run_id: str,
    created_at: datetime,
    sites: list[SiteRecord],
    pending: list[DetectedUpdate],
    ignored: list[IgnoreEntry],
    policy: Policy,
    selection: Selection,
    dry_run: bool,
    settings: PipelineSettings,
    planned_for: datetime | None = None,
    security: NightSecurity | None = None,
) -> Plan:
    """Async like the flows that call it: a sync task run there opens a Prefect client of its own. With
    `security` (the items classed against the vulnerability feed), fixes take the security lane."""
    first_seen = FirstSeenStore(settings.state_path).record(
        (update.release for update in pending), created_at.date()
    )
    plan = build_plan(
        run_id=run_id, created_at=created_at, sites=sites, pending=pending, ignored=ignored, policy=policy,
        first_seen=first_seen, selection=selection, dry_run=dry_run, planned_for=planned_for,
        security=security.items if security is not None else None,
    )
    store = HoldStore(settings.state_path)
    incidents = IncidentStore(settings.state_path)
    evidence = night_evidence(plan, sites, selection, incidents.open_incidents(),
                              incidents.listed(include_closed=True), policy, created_at)
    if not dry_run:  # a dry run neither ends holds nor counts their days
        store.weigh(evidence)
    holds = store.active()
    canaries = pick_canaries(plan.items, holds, evidence.cleared)
    if not dry_run:
        store.start_canaries(canaries, run_id)
    plan.items = hold_remembered(hold_rolled_back(plan.items, pending), holds, canaries)
    return plan


apply_policy_task = task(apply_policy, name="apply-policy", **STEP_OPTIONS)
