"""The rules of the nights' holds: a version that broke a site, or failed on several, is held fleet-wide.

A hold stops exactly the remembered version of an item, and is kept by evidence, not by one night's offers:
releases reach a fleet over days (each site checks on its own clock; sites outside their window, excluded or
failing to sync are offered nothing that night), so a quiet night proves nothing. A hold ends when an operator
releases it (`fleet holds release`), or when no open incident names the version AND whole-fleet nights (every
site listed: no selection, none outside its window, no failed sync) on the policy's `hold_quiet_days` days saw it
offered nowhere since it was last offered anywhere. A suspect (applied in the step that broke a site whose culprit
was not found) is tried again on one site alone, a canary, once that break's culprit is known, and released when
the canary stays healthy. The policy file's holds stay the operator's own; these are written and lifted by the
nights, and kept by `fleet.state.holds.HoldStore`, which only persists what these rules decide.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from fleet.model.keys import VersionKey, offered_key
from fleet.model.summary import ContainmentStatus, HoldKind, Incident, NightHold, Outcome, Selection, Summary
from fleet.model.vocabulary import count
from fleet.rules.plan import Decision, DetectedUpdate, Plan, PlanItem, SiteRecord, SiteStatus
from fleet.rules.policy import Policy, Rule


def hold_key(hold: NightHold) -> VersionKey:
    return (hold.type, hold.slug, hold.version)


def release_command(hold: NightHold) -> str:
    """What ends a hold at once, as the operator types it."""
    return f"fleet holds release {hold.item}@{hold.version}"


@dataclass(frozen=True)
class Canary:
    """A suspect's version tried tonight on one site alone."""

    key: VersionKey
    site_id: int


@dataclass(frozen=True)
class Evidence:
    """What a night knows when it weighs the holds: what was offered where, and what the incidents say."""

    offered: frozenset[VersionKey]  # every version offered to a listed site tonight (pending or ignored)
    whole_fleet: bool  # every site of the dashboard listed: no selection, none deferred, no failed sync
    named: dict[VersionKey, list[int]]  # version -> the open incidents that name it (culprit or suspect)
    culprits: frozenset[VersionKey]  # versions an incident knows as a break's culprit
    cleared: frozenset[VersionKey]  # the other suspects of those breaks: innocent there, to be tried alone
    quiet_days_needed: int
    today: date


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


@dataclass(frozen=True)
class Weighed:
    """One hold after tonight's evidence: its quiet days, the day it last counted one, and whether it ends."""

    hold: NightHold
    quiet_day: str | None
    ends_now: bool


def weigh(hold: NightHold, counted_on: str | None, evidence: Evidence) -> Weighed:
    """Tonight's evidence on one active hold (`counted_on`: the last day it counted a quiet day): an offer starts
    its quiet days over, a whole-fleet night that saw it offered nowhere counts its day (once per day however many
    such nights ran), an incident's culprit makes a suspect a culprit. It ends once its quiet days are enough and no
    open incident names it."""
    key, today = hold_key(hold), evidence.today.isoformat()
    quiet, last, day = hold.quiet_days, hold.last_offered, counted_on
    if key in evidence.offered:
        quiet, last, day = 0, evidence.today, None
    elif evidence.whole_fleet and day != today:
        quiet, day = quiet + 1, today
    kind = HoldKind.culprit if key in evidence.culprits else hold.kind
    hold = hold.model_copy(update={"kind": kind, "quiet_days": quiet, "last_offered": last})
    return Weighed(hold, day, quiet >= evidence.quiet_days_needed and key not in evidence.named)


def why_ended(evidence: Evidence) -> str:
    return (f"no open incident names it and whole-fleet nights saw it offered nowhere on "
            f"{count(evidence.quiet_days_needed, 'day')}, the last on {evidence.today.isoformat()}")


def first_ending(hold: NightHold, quiet_days_needed: int) -> str:
    """When a new hold would end, until a night weighs it."""
    return (f"ends once no open incident names it and whole-fleet nights see it offered nowhere on "
            f"{count(quiet_days_needed, 'day')}; or at once with: {release_command(hold)}")


def ending(hold: NightHold, evidence: Evidence) -> str:
    """When `hold` would end, in words: the evidence still standing, then the days still needed."""
    release = f"or at once with: {release_command(hold)}"
    left = max(1, evidence.quiet_days_needed - hold.quiet_days)
    days = (f"once whole-fleet nights see it offered nowhere on {count(left, 'more day')} (the earliest "
            f"{(evidence.today + timedelta(days=left - 1)).isoformat()})")
    incidents = evidence.named.get(hold_key(hold))
    if incidents:
        days = f"once incident {', '.join(map(str, incidents))} is closed and whole-fleet nights see it offered " \
               f"nowhere on {count(left, 'more day')}"
    canary = (" (a suspect: tried on one site alone once its break's culprit is known)"
              if hold.kind is HoldKind.suspect else "")
    return f"ends {days}{canary}; {release}"


def canary_verdicts(tried: list[tuple[VersionKey, int]], active: list[NightHold],
                    summary: Summary) -> tuple[list[tuple[NightHold, int]], list[VersionKey]]:
    """The suspects tried tonight on one site alone (`tried`: version, site): healthy when that site got the
    version and stayed healthy (not broken, its check after the night passed), else to be tried another night. A
    suspect found bad again tonight is a culprit now, and neither."""
    broken = {alarm.site_id for alarm in summary.broken}
    passed = {site.site_id for site in summary.sites if site.check is not None and site.check.healthy
              and not site.check.unverified}  # a night without checks (update-fleet) proves nothing
    got = {(item.site_id, *offered_key(item)) for item in summary.items if item.outcome is Outcome.updated}
    by_key = {hold_key(hold): hold for hold in active}
    healthy, retry = [], []
    for key, site_id in tried:
        hold = by_key.get(key)
        if hold is None or hold.kind is not HoldKind.suspect:
            continue
        if (site_id, *key) in got and site_id not in broken and site_id in passed:
            healthy.append((hold, site_id))
        else:
            retry.append(key)
    return healthy, retry


def bad_versions(summary: Summary, failures_to_hold: int, today: date) -> list[NightHold]:
    """The versions this night found bad: each suspect applied to a broken site (its culprit, when the break has
    one or only one suspect), and each version that failed on `failures_to_hold` sites or more (0: failures
    alone never hold)."""
    found: dict[VersionKey, NightHold] = {}
    for alarm in summary.broken:
        culprit = alarm.containment.culprit if alarm.containment is not None else None
        revived = alarm.containment is not None and alarm.containment.status is ContainmentStatus.revived
        applied = [s for s in alarm.suspects if s.to_version and (
            s.outcome in (Outcome.updated, Outcome.not_switched_on) or revived)]
        for suspect in applied:
            is_culprit = len(applied) == 1 or (culprit is not None and (culprit.type, culprit.slug)
                                               == (suspect.type, suspect.slug))
            key = offered_key(suspect)
            known = found.get(key)
            if known is not None and (known.kind is HoldKind.culprit or not is_culprit):
                continue
            found[key] = NightHold(
                type=suspect.type, slug=suspect.slug, name=suspect.name, version=suspect.to_version or "",
                reason=f"{'broke' if is_culprit else 'applied with the break of'} "
                       f"{alarm.site_name or alarm.site_url}: {alarm.saw}",
                site=alarm.site_url, since=today, kind=HoldKind.culprit if is_culprit else HoldKind.suspect)
    if failures_to_hold:
        failed = [item for item in summary.items if item.to_version and (
            item.outcome is Outcome.failed or item.rule == Rule.rolled_back)]  # a remembered rollback failed there
        counts = Counter(offered_key(item) for item in failed)
        for item in failed:
            key = offered_key(item)
            if counts[key] >= failures_to_hold and key not in found:
                found[key] = NightHold(type=item.type, slug=item.slug, name=item.name, version=item.to_version or "",
                                       reason=f"failed on {counts[key]} sites: {item.reason or 'no reason given'}",
                                       site=item.site_url, since=today, kind=HoldKind.failures)
    return list(found.values())


def pick_canaries(items: list[PlanItem], holds: list[NightHold], cleared: frozenset[VersionKey]) -> list[Canary]:
    """For each suspect whose break's culprit is now known (its incident names another version as the culprit),
    the one site that tries it tonight alone: the first (by site id) the plan would apply it to that gets no other
    canary."""
    ready = {hold_key(hold) for hold in holds if hold.kind is HoldKind.suspect and hold_key(hold) in cleared}
    chosen: dict[VersionKey, Canary] = {}
    busy: set[int] = set()  # one canary per site, so that a break names its version
    for item in sorted(items, key=lambda item: item.site_id):
        key = offered_key(item)
        if key in ready and key not in chosen and item.decision is Decision.apply and item.site_id not in busy:
            chosen[key] = Canary(key, item.site_id)
            busy.add(item.site_id)
    return list(chosen.values())


def hold_remembered(items: list[PlanItem], holds: list[NightHold], canaries: list[Canary] = ()) -> list[PlanItem]:
    """The plan's items with the remembered versions held (but on a canary's own site)."""
    by_version = {hold_key(hold): hold for hold in holds}
    trying = {(canary.site_id, *canary.key) for canary in canaries}
    decided = []
    for item in items:
        hold = by_version.get(offered_key(item))
        if hold is not None and item.decision is Decision.apply:
            if (item.site_id, item.type, item.slug, item.to_version or "") in trying:
                item = item.model_copy(update={"reason": f"a canary: held elsewhere as a suspect since "
                                                          f"{hold.since.isoformat()}, tried on this site alone"})
            else:
                item = item.model_copy(update={
                    "decision": Decision.held, "rule": Rule.night_hold,
                    "reason": f"held since {hold.since.isoformat()} ({hold.kind.value}): {hold.reason} "
                              f"(release: {release_command(hold)})"})
        decided.append(item)
    return decided


def hold_rolled_back(items: list[PlanItem], pending: list[DetectedUpdate]) -> list[PlanItem]:
    """The plan's items with every version MainWP remembers as rolled back (on any site) held: that version
    failed where it was tried, so it is sent nowhere. Each site that remembers it counts as one failure towards
    `hold_after_failures` (`bad_versions`)."""
    where: dict[VersionKey, set[int]] = {}
    for update in pending:
        if update.rolled_back and update.to_version:
            where.setdefault(offered_key(update), set()).add(update.site_id)
    decided = []
    for item in items:
        sites = where.get(offered_key(item))
        if sites and item.decision is Decision.apply:
            here = item.site_id in sites
            item = item.model_copy(update={
                "decision": Decision.held, "rule": Rule.rolled_back if here else Rule.rolled_back_elsewhere,
                "reason": f"held: WordPress rolled version {item.to_version} back on {count(len(sites), 'site')}"
                          f"{', this one included' if here else ''}, as the dashboard remembers; it is not sent "
                          "again until a newer version is offered"})
        decided.append(item)
    return decided
