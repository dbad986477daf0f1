"""Lanes: a cohort's sites in chunks that each go through the whole night on their own.

A lane runs its sites through every update type in the safe order, then checks, re-syncs and reconciles them,
without waiting for the rest of the fleet: while one lane is being checked, the others keep the dashboard's
workers busy with updates, so no step waits for the slowest chunk of the step before it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fleet.model.summary import UpdateType
from fleet.model.vulnerability import VulnerabilityClass
from fleet.pacing.child_slots import grouped_by_server, server_key
from fleet.pacing.fan_out import chunked
from fleet.rules.plan import Decision, Plan, PlanCohort, PlanItem, SiteRecord


@dataclass
class Lane:
    """A chunk of sites with the items planned for them and, per type, the slugs their calls must not touch."""

    label: str
    sites: list[SiteRecord]
    items: list[PlanItem]
    untouchable: dict[UpdateType, dict[int, list[str]]] = field(default_factory=dict)
    switch_on: bool = False  # the way back: the plugins its plugin step updated are switched on before the probe

    @property
    def site_ids(self) -> list[int]:
        return [site.id for site in self.sites]

    def items_of(self, type_: UpdateType) -> list[PlanItem]:
        return [item for item in self.items if item.type is type_]


def split_into_lanes(plan: Plan, cohort: PlanCohort, lane_size: int) -> list[Lane]:
    """The cohort's sites with work, in lanes of at most `lane_size` sites (one pass over the plan's items).

    Fixes go first: the sites with an update that fixes a known vulnerability (and the other sites of their
    servers, which share their lane) fill the first lanes, so they start before the routine ones and are done
    first should the cohort stop early (a window closing, the failure budget)."""
    members = set(cohort.site_ids)
    to_apply: dict[int, list[PlanItem]] = defaultdict(list)
    untouchable: dict[int, dict[UpdateType, list[str]]] = defaultdict(lambda: defaultdict(list))
    for item in plan.items:
        if item.site_id not in members:
            continue
        if item.decision is Decision.apply:
            to_apply[item.site_id].append(item)
        else:
            untouchable[item.site_id][item.type].append(item.slug)
    fixing = {site_id for site_id, items in to_apply.items() if any(fixes_a_vulnerability(item) for item in items)}
    with_work = sorted((site for site in plan.sites if site.id in to_apply), key=lambda site: site.id not in fixing)
    sites = grouped_by_server(with_work, lambda site: server_key(site.id, site.ip))  # a server's sites share a lane
    parts = chunked(sites, lane_size)
    lanes = []
    for number, part in enumerate(parts, start=1):
        kept: dict[UpdateType, dict[int, list[str]]] = defaultdict(dict)
        for site in part:
            for type_, slugs in untouchable.get(site.id, {}).items():
                kept[type_][site.id] = slugs
        lanes.append(Lane(label=f"{number}-of-{len(parts)}", sites=part,
                          items=[item for site in part for item in to_apply[site.id]], untouchable=dict(kept)))
    return lanes


def fixes_a_vulnerability(item: PlanItem) -> bool:
    return item.security is not None and item.security.security is VulnerabilityClass.fixes


def without_sites(lane: Lane, site_ids: set[int]) -> tuple[Lane, list[PlanItem]]:
    """The lane less some of its sites, and the items those sites had planned."""
    kept = Lane(label=lane.label, sites=[site for site in lane.sites if site.id not in site_ids],
                items=[item for item in lane.items if item.site_id not in site_ids],
                untouchable={type_: {site: slugs for site, slugs in by_site.items() if site not in site_ids}
                             for type_, by_site in lane.untouchable.items()}, switch_on=lane.switch_on)
    return kept, [item for item in lane.items if item.site_id in site_ids]


def way_back_lane(plan: Plan, fixed: list[PlanItem]) -> Lane:
    """The fixed releases of deactivated culprits, each on its own site, as one lane whose calls touch nothing else
    of those sites (every other plugin of theirs is untouchable) and whose plugins are switched on once updated."""
    chosen = {(item.site_id, item.slug) for item in fixed}
    sites = {item.site_id for item in fixed}
    untouchable: dict[int, list[str]] = defaultdict(list)
    for item in plan.items:
        if item.site_id in sites and item.type is UpdateType.plugin and (item.site_id, item.slug) not in chosen:
            untouchable[item.site_id].append(item.slug)
    return Lane(label="way-back", sites=[site for site in plan.sites if site.id in sites], items=list(fixed),
                untouchable={UpdateType.plugin: dict(untouchable)}, switch_on=True)
