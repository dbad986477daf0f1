"""Step 4: decide every detected and ignored item against the policy (with first-seen dates for minimum age),
and hold the versions earlier nights remembered as bad, and those MainWP remembers WordPress rolled back."""

from __future__ import annotations

from datetime import datetime

from prefect import task

from fleet.engine.vulnerability_review import NightSecurity
from fleet.model.keys import VersionKey, offered_key
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Incident, Selection
from fleet.rules.plan import DetectedUpdate, IgnoreEntry, Plan, SiteRecord, SiteStatus, build_plan
from fleet.rules.policy import Policy
from fleet.state.first_seen import FirstSeenStore
from fleet.state.holds import Evidence, HoldStore, hold_remembered, hold_rolled_back, pick_canaries
from fleet.state.incidents import IncidentStore
from tasks.retries import STEP_OPTIONS


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


def night_evidence(plan: Plan, sites: list[SiteRecord], selection: Selection, open_incidents: list[Incident],
                   every_incident: list[Incident], policy: Policy, created_at: datetime) -> Evidence:
    """What tonight's listing and the incidents say about the holds. Only a night that listed every site (no
    selection, none outside its window or in a blackout, every site synced) can say a version is offered nowhere."""
    named: dict[VersionKey, list[int]] = {}
    for incident in open_incidents:
        for suspect in ([incident.culprit] if incident.culprit else []) + incident.suspects:
            if suspect.to_version:
                named.setdefault(offered_key(suspect), []).append(incident.id)
    with_culprit = [incident for incident in every_incident if incident.culprit and incident.culprit.to_version]
    cleared = {offered_key(s) for incident in with_culprit for s in incident.suspects
               if s.to_version and (s.type, s.slug) != (incident.culprit.type, incident.culprit.slug)}
    return Evidence(
        offered=frozenset(offered_key(item) for item in plan.items),
        whole_fleet=selection.covers_every_site and all(
            site.status is SiteStatus.online and site.deferral is None for site in sites),
        named={key: sorted(set(ids)) for key, ids in named.items()},
        culprits=frozenset((i.culprit.type, i.culprit.slug, i.culprit.to_version or "") for i in with_culprit),
        cleared=frozenset(cleared),
        quiet_days_needed=policy.hold_quiet_days, today=created_at.date())


apply_policy_task = task(apply_policy, name="apply-policy", **STEP_OPTIONS)
