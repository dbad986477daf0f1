"""The plan: every update found at detection, and the decision taken for it before anything is touched.

Built from the fleet (sites), the pending updates, the dashboard's ignore lists, the policy and the first-seen
dates. The executor reads only the plan; it never re-reads the policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import StrEnum
from functools import cached_property
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from fleet.model.keys import ItemKey, item_key
from fleet.model.release import UpdateKey
from fleet.model.summary import Outcome, Record, Selection, UpdateType
from fleet.model.vulnerability import ItemVulnerabilities
from fleet.rules.policy import EffectiveRules, OverrideNames, Policy, Rule, SecurityLane
from fleet.rules.security_lane import ROUTINE, lane_pass, urgent_fix
from fleet.rules.windows import Deferral


class SiteStatus(StrEnum):
    online = "online"
    offline = "offline"
    suspended = "suspended"
    disconnected = "disconnected"
    child_too_old = "child_too_old"


_STATUS_BY_ERROR = {"site_offline": SiteStatus.offline, "child_outdated": SiteStatus.child_too_old,
                    "site_suspended": SiteStatus.suspended}


def status_for_error(code: str) -> SiteStatus:
    """What a failed sync says about a site: offline, child too old, or (any other failure) disconnected."""
    bare = code.removeprefix("svc_").removeprefix("mainwp_")
    return _STATUS_BY_ERROR.get(bare, SiteStatus.disconnected)


class SiteRecord(Record):
    """A site as the pipeline sees it after the sync."""

    id: int
    url: str
    name: str
    client: str | None = None
    tags: list[str] = Field(default_factory=list)
    status: SiteStatus = SiteStatus.online
    status_reason: str | None = None
    deferral: Deferral | None = None  # outside its window or in a blackout: listed, never touched
    window_closes_at: datetime | None = None  # no new calls for this site from this moment
    last_sync: datetime | None = None
    ip: str = ""  # its server's address, as the dashboard records it ("" unknown: a server of its own)
    revived: bool = False  # refused by the dashboard as known offline, then checked, answering and synced tonight

    def synced_within(self, hours: float, now: datetime) -> bool:
        """The dashboard synced this site less than `hours` ago (never, for 0 hours)."""
        return hours > 0 and self.last_sync is not None and now - self.last_sync < timedelta(hours=hours)

    @cached_property
    def domain(self) -> str:
        host = urlsplit(self.url if "//" in self.url else f"//{self.url}").hostname or self.url
        return host.lower().removeprefix("www.")

    @property
    def names(self) -> tuple[str, str]:
        """The names an operator may use for this site: its id and its domain."""
        return str(self.id), self.domain


class DetectedUpdate(Record):
    """One update the dashboard offers for one site."""

    site_id: int
    type: UpdateType
    slug: str
    name: str = ""
    from_version: str | None = None
    to_version: str | None = None
    rolled_back: bool = False  # MainWP remembers WordPress rolling `to_version` back on this site

    @property
    def key(self) -> ItemKey:
        return item_key(self)

    @property
    def release(self) -> UpdateKey:
        """The release offered, for the first-seen store (translations carry only their pack version)."""
        return self.type.value, self.slug, self.to_version or self.from_version or ""


class IgnoreEntry(Record):
    """An entry of the dashboard's ignore lists (global entries come repeated for every site)."""

    site_id: int
    type: UpdateType
    slug: str
    name: str = ""
    ignored_version: str = "all_versions"

    def covers(self, to_version: str | None) -> bool:
        versions = {part.strip() for part in self.ignored_version.split(",")}
        return "all_versions" in versions or (to_version or "") in versions


class Decision(StrEnum):
    apply = "apply"
    held = "held"
    ignored = "ignored"
    delayed = "delayed"
    excluded = "excluded"
    skipped = "skipped"
    deferred = "deferred"
    awaiting_approval = "awaiting_approval"  # applied only once a person approves it at the night's gate


class PlanItem(DetectedUpdate):
    decision: Decision
    reason: str | None = None
    rule: str | None = None
    until: date | None = None
    opens_at: datetime | None = None
    cohort: str | None = None
    approved_by: str | None = None
    security: ItemVulnerabilities | None = None  # its class against the vulnerability feed (None: not classed)
    last_good: str | None = None  # the way back: the version that last worked on its site (an open incident's)

    @property
    def to_restore(self) -> str | None:
        """The version to put back if this release breaks its site: the one before it, or on the way back the one
        that last worked (the version before it broke the site and is held)."""
        return self.last_good or self.from_version

    @property
    def outcome(self) -> Outcome:
        """The outcome of an item that is not applied (one still awaiting approval is held: nobody said yes)."""
        return Outcome.held if self.decision is Decision.awaiting_approval else Outcome(self.decision.value)


class PlanCohort(BaseModel):
    name: str
    site_ids: list[int]
    failure_budget: int = 0


class Plan(BaseModel):
    run_id: str
    created_at: datetime
    dry_run: bool = False
    planned_for: datetime | None = None  # a rehearsal: windows, blackouts and dates as at this moment
    selection: Selection = Field(default_factory=Selection)
    sites: list[SiteRecord] = Field(default_factory=list)
    items: list[PlanItem] = Field(default_factory=list)
    cohorts: list[PlanCohort] = Field(default_factory=list)

    def to_apply(self, site_ids: Iterable[int] | None = None) -> list[PlanItem]:
        wanted = None if site_ids is None else set(site_ids)
        return [
            item
            for item in self.items
            if item.decision is Decision.apply and (wanted is None or item.site_id in wanted)
        ]


def select_sites(sites: list[SiteRecord], selection: Selection) -> list[SiteRecord]:
    """Sites matching the selection: any of the listed sites, AND any of the tags, AND any of the clients."""
    wanted_sites = {entry.strip().lower().removeprefix("www.") for entry in selection.sites}
    wanted_sites |= {SiteRecord(id=0, url=entry, name="").domain for entry in selection.sites if "//" in entry}
    wanted_tags = {tag.lower() for tag in selection.tags}
    wanted_clients = {client.lower() for client in selection.clients}
    chosen = []
    for site in sites:
        if wanted_sites and not wanted_sites & set(site.names):
            continue
        if wanted_tags and not wanted_tags & {tag.lower() for tag in site.tags}:
            continue
        if wanted_clients and (site.client or "").lower() not in wanted_clients:
            continue
        chosen.append(site)
    return chosen


def unmatched_selection(sites: list[SiteRecord], selection: Selection) -> list[str]:
    """Site ids or domains in the selection that name no site (worth a run-level error)."""
    known = {key for site in sites for key in site.names}
    return [
        entry
        for entry in selection.sites
        if entry.strip().lower().removeprefix("www.") not in known
        and SiteRecord(id=0, url=entry, name="").domain not in known
    ]


class NoSiteMatches(ValueError):  # noqa: N818 - the message reads "no site matches '9999'"
    """A value of the selection names no site: the run stops before any request that writes."""


def check_selection(sites: list[SiteRecord], selection: Selection) -> None:
    """Raise `NoSiteMatches` for every site, tag or client of the selection that matches no site of the fleet.

    A typo must not turn into a night that quietly works on fewer sites (or none).
    """
    tags = {tag.lower() for site in sites for tag in site.tags}
    clients = {(site.client or "").lower() for site in sites}
    misses = [f"no site matches {entry!r}" for entry in unmatched_selection(sites, selection)]
    misses += [f"no site matches tag {tag!r}" for tag in selection.tags if tag.lower() not in tags]
    misses += [f"no site matches client {name!r}" for name in selection.clients if name.lower() not in clients]
    if misses:
        raise NoSiteMatches("; ".join(misses))


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """Everything a plan is decided from, as one value: the planners (the night's policy step, the security run's
    look between nights) hand it on whole instead of restating its parts."""

    run_id: str
    created_at: datetime
    sites: list[SiteRecord]  # already selected
    pending: list[DetectedUpdate]
    ignored: list[IgnoreEntry]
    policy: Policy
    selection: Selection
    first_seen: Mapping[UpdateKey, date] = field(default_factory=dict)  # a release not in it: first seen today
    dry_run: bool = False
    planned_for: datetime | None = None  # a rehearsal: windows, blackouts and dates as at this moment
    vulnerabilities: Mapping[ItemKey, ItemVulnerabilities] | None = None  # each item's class against the feed


def build_plan(request: PlanRequest) -> Plan:
    """Decide every pending and ignored item of the request's sites, as at its `planned_for`.

    `vulnerabilities` (each item's class against the vulnerability feed) puts the fixes in the security lane
    (`fleet.rules.security_lane`): past a closed window (its site then no longer deferred) and `min_age_days`."""
    sites, policy, selection = request.sites, request.policy, request.selection
    vulnerabilities = request.vulnerabilities
    today = (request.planned_for or request.created_at).date()
    by_id = {site.id: site for site in sites}
    ignores: dict[tuple[int, UpdateType, str], IgnoreEntry] = {}
    for entry in request.ignored:
        if entry.site_id in by_id:
            ignores.setdefault(item_key(entry), entry)
    items: list[PlanItem] = []
    rules: dict[OverrideNames, EffectiveRules] = {}
    seen: set[tuple[int, UpdateType, str]] = set()
    opened: set[int] = set()  # deferred sites a security fix goes to tonight
    for update in request.pending:
        site = by_id.get(update.site_id)
        if site is None or update.key in seen:
            continue
        seen.add(update.key)
        entry = ignores.get(update.key)
        if entry is not None and entry.covers(update.to_version):
            items.append(_ignored(update, entry))
            continue
        fast = (lane_pass(vulnerabilities.get(update.key), site.deferral, policy.security) if vulnerabilities
                else ROUTINE)
        if site.deferral is not None and not fast.past_window:
            rule = Rule.blackout if site.deferral.blackout else Rule.window
            items.append(PlanItem(**update.model_dump(), decision=Decision.deferred, rule=rule,
                                  reason=site.deferral.explained, opens_at=site.deferral.opens_at))
            continue
        if site.status is not SiteStatus.online:
            reason = site.status_reason or f"site is {site.status.value.replace('_', ' ')}"
            items.append(
                PlanItem(**update.model_dump(), decision=Decision.skipped, rule=Rule.site_status, reason=reason)
            )
            continue
        if update.type not in selection.types:
            items.append(
                PlanItem(
                    **update.model_dump(),
                    decision=Decision.excluded,
                    rule=Rule.selection,
                    reason=f"{update.type} updates were not selected for this run",
                )
            )
            continue
        names = policy.overrides_for(site.names, site.tags, site.client)
        if names not in rules:
            rules[names] = policy.merged(names)
        verdict = rules[names].decide(
            update.type,
            update.slug,
            update.name,
            update.from_version,
            update.to_version,
            request.first_seen.get(update.release, today),
            today,
        )
        if verdict is not None and verdict.rule is Rule.min_age and fast.past_min_age:
            verdict = None
        gate = fast.approval or (policy.approval.needs(update.type, update.slug, update.name, update.from_version,
                                                       update.to_version, site.tags) if policy.approval else None)
        if verdict is None and fast.past_window:
            opened.add(site.id)
        if verdict is None and gate is not None:
            items.append(PlanItem(**update.model_dump(), decision=Decision.awaiting_approval, rule=Rule.approval,
                                  reason=gate))
        elif verdict is None:
            items.append(PlanItem(**update.model_dump(), decision=Decision.apply))
        else:
            items.append(
                PlanItem(
                    **update.model_dump(),
                    decision=Decision(verdict.outcome.value),
                    rule=verdict.rule,
                    reason=verdict.reason,
                    until=verdict.until,
                )
            )
    for key, entry in ignores.items():
        if key not in seen:
            seen.add(key)
            version = None if "all_versions" in entry.ignored_version else entry.ignored_version
            update = DetectedUpdate(
                site_id=entry.site_id, type=entry.type, slug=entry.slug, name=entry.name, to_version=version
            )
            items.append(_ignored(update, entry))
    if opened:
        sites = [site.model_copy(update={"deferral": None}) if site.id in opened else site for site in sites]
    for item in items if vulnerabilities else ():  # plan.json says what each update fixes or leaves open
        item.security = vulnerabilities.get(item_key(item))
    return Plan(run_id=request.run_id, created_at=request.created_at, dry_run=request.dry_run,
                planned_for=request.planned_for, selection=selection, sites=sites, items=items)


def fixes_only(plan: Plan, lane: SecurityLane) -> Plan:
    """A security run's plan (between nights): only the updates that fix a vulnerability at or above the policy's
    threshold, whatever their decision; every other item is left to the next night, out of this run's plan."""
    return plan.model_copy(update={"items": [item for item in plan.items if urgent_fix(item.security, lane)]})


def _ignored(update: DetectedUpdate, entry: IgnoreEntry) -> PlanItem:
    versions = "all versions" if "all_versions" in entry.ignored_version else f"version {entry.ignored_version}"
    return PlanItem(
        **update.model_dump(),
        decision=Decision.ignored,
        rule=Rule.ignore_list,
        reason=f"on the dashboard's ignore list ({versions})",
    )
