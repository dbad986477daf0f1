"""How planned items become update calls, and what the dashboard said about each item afterwards.

`run-updates-v1` takes one slug filter for every site of a call and queued jobs ignore the ignore lists, so a
call only ever groups sites whose planned slugs of that type are exactly the same: nothing unplanned can be
touched. What the answers say is kept as reports; only reconcile decides outcomes.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from enum import StrEnum

from pydantic import BaseModel, Field

from dashboard.models import JobStatus, SiteItemsUpdate, UpdateRunResult
from fleet.model.summary import Job, Record, UpdateType
from fleet.pacing.call_sizing import Work
from fleet.rules.plan import PlanItem

APPLY_ORDER = (UpdateType.translation, UpdateType.plugin, UpdateType.theme, UpdateType.core)
_JOB_TYPE_ALIASES = {"plugins": "plugin", "themes": "theme", "translations": "translation", "wp": "core"}


class UpdateCall(BaseModel):
    """One update call: these sites, this type, exactly these slugs (`per_site`: one site, its REST route)."""

    type: UpdateType
    site_ids: list[int]
    slugs: list[str]
    per_site: bool = False


class ItemReport(Record):
    """What an answer said about one item, or about a whole site when `slug` is None."""

    site_id: int
    type: UpdateType | None = None
    slug: str | None = None
    ok: bool
    message: str | None = None
    old_version: str | None = None
    new_version: str | None = None


class CallResult(BaseModel):
    call: UpdateCall
    job_id: str | None = Field(None, description="The batch job the dashboard queued for this call.")
    reused: bool = Field(False, description="The job was started earlier (a retry or a re-run) and re-used.")
    reports: list[ItemReport] = Field(default_factory=list)
    error: str | None = Field(None, description="The call itself failed; nothing is known of its items.")
    lost: str | None = Field(None, description="The answer was lost (504, timeout): the call may have run.")
    quiet: bool = Field(True, description="After a lost answer: its sites went quiet before they were re-read.")


class JobEnding(StrEnum):
    """How the sensor's wait on a job ended without the job finishing (a finished job keeps the dashboard's
    `JobState`)."""

    never_started = "never_started"
    stalled = "stalled"
    deadline = "deadline"
    expired = "expired"
    not_found = "not_found"
    error = "error"


class JobOutcome(BaseModel):
    """A batch job the sensor waited on, and the per-site errors it recorded."""

    job: Job
    site_ids: list[int] = Field(default_factory=list)
    finished: bool = Field(description="The dashboard finished the job (completed, or failed at its timeout).")
    reports: list[ItemReport] = Field(default_factory=list)


def split_evenly(values: list[int], limit: int) -> list[list[int]]:
    """Split into the fewest parts of at most `limit`, of nearly equal size."""
    if not values:
        return []
    parts = math.ceil(len(values) / limit)
    size = math.ceil(len(values) / parts)
    return [values[start : start + size] for start in range(0, len(values), size)]


def pack_compatible(
    site_ids: list[int], planned: Mapping[int, set[str]], keep: Mapping[int, set[str]], candidates: int = 64
) -> list[tuple[set[str], list[int]]]:
    """Group the set-aside sites into few shared filters (first fit): a site joins a group when the group's
    filter plus its own slugs holds none of its untouchable slugs, and its slugs are untouchable for no site
    already in the group. One call per site with its own slug mix was most of the update requests.

    Only the `candidates` most recent groups are tried, which keeps this linear at 10,000 sites.
    """
    groups: list[tuple[set[str], set[str], list[int]]] = []  # (filter, untouchable of its sites, sites)
    for site_id in site_ids:
        mine, avoid = planned[site_id], keep.get(site_id, set())
        for slugs, guarded, members in reversed(groups[-candidates:]):
            if not mine & guarded and not (slugs | mine) & avoid:
                slugs |= mine
                guarded |= avoid
                members.append(site_id)
                break
        else:
            groups.append((set(mine), set(avoid), [site_id]))
    return [(slugs, members) for slugs, _, members in groups]


def plan_calls(
    items: Iterable[PlanItem],
    type_: UpdateType,
    sites_per_call: int,
    untouchable: Mapping[int, Iterable[str]] | None = None,
) -> list[UpdateCall]:
    """The calls that apply exactly the planned items of one type; never an empty slug list.

    A call's slug filter applies to every site in it, so a site may only be in a call whose filter holds none
    of its `untouchable` slugs (items of this type it has pending or ignored that are not planned):
    - the sites share one filter, the union of their planned slugs, as long as none of them has an
      untouchable slug in it (sites that do are set aside until the union is safe for all that remain, and
      join again if the union then covers their planned slugs without any untouchable one);
    - the sites still set aside are packed into as few compatible filters as they allow (`pack_compatible`);
    - translations are not filtered by slug in a batch job, so a site with untouchable translations gets a
      call of its own on the per-site route, which updates only the named slugs.
    """
    planned: dict[int, set[str]] = defaultdict(set)
    for item in items:
        if item.type is type_:
            planned[item.site_id].add(item.slug)
    keep = {site_id: set(slugs) for site_id, slugs in (untouchable or {}).items() if slugs}
    calls = []
    if type_ is UpdateType.translation:
        for site_id in sorted(planned.keys() & keep.keys()):
            slugs = sorted(planned.pop(site_id))
            calls.append(UpdateCall(type=type_, site_ids=[site_id], slugs=slugs, per_site=True))
    shared, aside = set(planned), set()
    while True:
        union = set().union(*(planned[site_id] for site_id in shared))
        clash = {site_id for site_id in shared if keep.get(site_id, set()) & union}
        if not clash:
            break
        shared -= clash
        aside |= clash
    fits = {site_id for site_id in aside if planned[site_id] <= union and not keep[site_id] & union}
    shared, aside = shared | fits, aside - fits
    groups = [(tuple(sorted(slugs)), site_ids) for slugs, site_ids in pack_compatible(sorted(aside), planned, keep)]
    if shared:
        groups.append((tuple(sorted(union)), sorted(shared)))
    for slugs, site_ids in sorted(groups, key=lambda group: (-len(group[1]), group[1][0])):
        for part in split_evenly(sorted(site_ids), sites_per_call):
            calls.append(UpdateCall(type=type_, site_ids=part, slugs=list(slugs)))
    return calls


def sized_groups(
    items: list[PlanItem], type_: UpdateType, untouchable: dict[int, list[str]] | None
) -> dict[tuple[tuple[str, ...], bool], list[Work]]:
    """The safe slug filters of `plan_calls`, each with its sites' work: one unit per planned item.

    Any part of a group may be sent on its own with the union of its sites' slugs as the filter: a subset of
    a filter that touches nothing unplanned touches nothing unplanned either.
    """
    planned: dict[int, list[str]] = {}
    for item in items:
        planned.setdefault(item.site_id, []).append(item.slug)
    groups: dict[tuple[tuple[str, ...], bool], list[Work]] = {}
    for call in plan_calls(items, type_, len(planned) or 1, untouchable):
        key = (tuple(call.slugs), call.per_site)
        groups.setdefault(key, []).extend(
            Work(site_id, len(planned[site_id]), tuple(sorted(planned[site_id]))) for site_id in call.site_ids
        )
    return groups


def reports_from_run(result: UpdateRunResult) -> list[ItemReport]:
    """Item reports of an immediate answer. A theme failure is silent there: it simply has no report."""
    reports = [
        ItemReport(
            site_id=done.site_id,
            type=done.type,
            slug=done.slug,
            ok=True,
            old_version=done.old_version,
            new_version=done.new_version,
        )
        for done in result.updated
    ]
    for error in result.errors:
        if not error.site_id:
            continue  # an identifier that named no site: no item of the plan is behind it
        type_ = _update_type(error.type)
        reports.append(
            ItemReport(
                site_id=error.site_id,
                type=type_,
                slug=(error.slug or None) if type_ else None,
                ok=False,
                message=f"{error.message} [{error.code}]" if error.code else error.message,
            )
        )
    return reports


def reports_from_site_route(site_id: int, answer: SiteItemsUpdate) -> list[ItemReport]:
    """Item reports of a REST per-site update; a success that installed nothing is kept as reported."""
    return [
        ItemReport(site_id=site_id, type=answer.type, slug=item.slug, ok=item.success,
                   message=None if item.success else (item.error or "the site reported the update failed"),
                   old_version=item.old_version, new_version=item.version)
        for item in answer.items
    ]


def _update_type(text: str) -> UpdateType | None:
    key = text.strip().lower()
    key = _JOB_TYPE_ALIASES.get(key, key)
    return UpdateType(key) if key in UpdateType.__members__ else None


_JOB_ERROR_PART = re.compile(r"^\s*(?P<type>[a-z]+)\s*:\s*(?:(?P<slug>[^:]+?)\s*:\s*)?(?P<message>.*)$")


def reports_from_job(status: JobStatus) -> list[ItemReport]:
    """Per-site job errors (`"plugins: akismet/akismet.php: Download failed.; core: ..."`) as item reports."""
    reports = []
    for error in status.errors:
        if not error.site_id:
            continue  # the job-level timeout entry (site 0)
        parts = [part for part in error.message.split("; ") if part.strip()] or [error.message]
        for part in parts:
            match = _JOB_ERROR_PART.match(part)
            type_ = _update_type(match["type"]) if match else None
            if match and type_ is not None:
                slug = (match["slug"] or None) if type_ is not UpdateType.core else "wordpress"
                reports.append(
                    ItemReport(site_id=error.site_id, type=type_, slug=slug, ok=False, message=match["message"])
                )
            else:
                reports.append(ItemReport(site_id=error.site_id, ok=False, message=f"{part} [{error.code}]"))
    return reports
