"""The culprit, not a list of suspects: a site that fails its home-page probe after a plugin step while its MainWP
Child still answers gets halves of that step's plugins deactivated and re-activated, probed after each round, until
one plugin is left whose deactivation alone brings the home page back. That plugin stays deactivated (the site is
contained); every other plugin of the step stays updated and active.

A site whose child no longer answers (a fatal while WordPress loads) cannot be helped through the dashboard: the
operator is told at once which folder to rename and which version to restore. The dashboard work is behind a
`Switchboard`, so that the rules here run without HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fleet.model.summary import Containment, ContainmentStatus, Suspect, UpdateType
from fleet.model.vocabulary import count
from fleet.rules.plan import PlanItem
from fleet.rules.policy import ContainMode, Policy

ITEM_FOLDERS = {UpdateType.plugin: "wp-content/plugins", UpdateType.theme: "wp-content/themes"}


class ChildUnreachable(Exception):  # noqa: N818 - it names what the dashboard found
    """The site's MainWP Child did not answer the dashboard: nothing can be switched on it."""


class Switchboard(Protocol):
    """What containment asks of one site: its active plugins, switching some, and the two probes."""

    async def active_plugins(self) -> set[str]: ...

    async def deactivate(self, slugs: list[str]) -> None: ...  # raises ChildUnreachable

    async def activate(self, slugs: list[str]) -> None: ...  # raises ChildUnreachable

    async def home_page_ok(self) -> bool: ...  # the home page answers (and no page looks broken, where one did)

    async def child_unreachable(self) -> str | None: ...  # why the child does not answer, or None


@dataclass
class Bisection:
    culprit: str | None
    rounds: int


async def bisect(suspects: list[str], board: Switchboard) -> Bisection:
    """The one suspect whose deactivation alone brings the home page back (None: no single one does, and every
    suspect is active again). Each round deactivates the first half of the candidates left (and re-activates the
    rest) and probes: healthy, the culprit is in that half; still broken, in the other. A single bad plugin
    among n costs at most ceil(log2 n) + 1 rounds; it is left deactivated, as the last healthy probe saw it."""
    candidates, off, rounds = list(suspects), [], 0

    async def switch_off_only(chosen: list[str]) -> None:
        nonlocal off
        back_on = [slug for slug in off if slug not in chosen]
        if back_on:
            await board.activate(back_on)
        newly_off = [slug for slug in chosen if slug not in off]
        if newly_off:
            await board.deactivate(newly_off)
        off = list(chosen)

    while candidates:
        half = candidates[: max(1, len(candidates) // 2)]
        await switch_off_only(half)
        rounds += 1
        if await board.home_page_ok():
            if len(half) == 1:
                return Bisection(half[0], rounds)
            candidates = half
        else:
            candidates = candidates[len(half):]
    await switch_off_only([])
    return Bisection(None, rounds)


def suspect_of(item: PlanItem) -> Suspect:
    return Suspect(type=item.type, slug=item.slug, name=item.name, from_version=item.from_version,
                   to_version=item.to_version)


def switch_on_failed(item: PlanItem, why: str) -> Containment:
    """The way back's fixed release, installed while switched off, that could not be switched on (the dashboard's
    error answer, such as 500 NOMAINWP: WordPress died loading it and left it off). A break like any other: that
    release is the culprit, it stays deactivated, and the night holds it."""
    name = item.name or item.slug
    return Containment(
        step=UpdateType.plugin, saw=f"switching on {name} {item.to_version} failed: {why}",
        status=ContainmentStatus.contained, culprit=suspect_of(item), never_ran=True,
        detail=f"{name} {item.to_version} (the way back) was installed switched off and never ran; it stays "
               "deactivated",
        next_steps=f"{name} stays deactivated: restore version {item.to_restore or 'the last good one'} or wait "
                   "for a release that switches on, then re-activate it")


def restore_steps(applied: list[PlanItem]) -> str:
    """What the operator does by hand for a site the dashboard cannot reach: per item the step applied, the folder
    to rename (WordPress then skips its code) and the version to restore."""
    steps = []
    for item in applied:
        folder = ITEM_FOLDERS.get(item.type)
        back = f"restore version {item.to_restore}" if item.to_restore else "restore the version before"
        if folder:
            steps.append(f"rename {folder}/{item.slug.split('/', 1)[0]} ({item.name or item.slug}), then {back}")
        else:
            steps.append(f"{item.name or item.slug}: {back}")
    return "; ".join(steps) or "look at the site's PHP error log"


async def contain_site(step: UpdateType, applied: list[PlanItem], policy: Policy, board: Switchboard) -> Containment:
    """What to do about a site that failed its probe after `step`, which applied `applied` to it."""
    try:
        if step is not UpdateType.plugin:
            return await _left_as_it_is(step, applied, board, ContainmentStatus.not_plugins,
                                        f"the {step.value} update broke it; only plugins can be deactivated")
        if policy.contain is ContainMode.report:
            return await _left_as_it_is(step, applied, board, ContainmentStatus.reported,
                                        "the policy says report (contain: report): nothing was deactivated")
        active = await board.active_plugins()
        suspects = [item for item in applied if item.slug in active and policy.may_deactivate(item.slug)]
        protected = [item.name or item.slug for item in applied if not policy.may_deactivate(item.slug)]
        if not suspects:
            why = (f"never deactivated by policy: {', '.join(protected)}" if protected
                   else "none of the updated plugins is active")
            return await _left_as_it_is(step, applied, board, ContainmentStatus.reported, why)
        found = await bisect([item.slug for item in suspects], board)
    except ChildUnreachable as error:
        return unreachable(step, applied, str(error))
    if found.culprit is None:
        also = f" (never deactivated by policy: {', '.join(protected)})" if protected else ""
        return Containment(
            step=step, status=ContainmentStatus.not_contained, rounds=found.rounds,
            detail=f"deactivating the {count(len(suspects), 'updated plugin')} one half at a time did not bring the "
                   f"home page back{also}; all were re-activated",
            next_steps="look at the site's PHP error log; roll back the suspects by hand")
    culprit = next(item for item in suspects if item.slug == found.culprit)
    return Containment(
        step=step, status=ContainmentStatus.contained, culprit=suspect_of(culprit), rounds=found.rounds,
        detail=f"{culprit.name or culprit.slug} {culprit.to_version} broke the site; deactivated, the site passes "
               f"its check again ({count(found.rounds, 'round')} of deactivating and checking)",
        next_steps=f"{culprit.name or culprit.slug} stays deactivated (fleet holds list says which versions "
                   f"the nights hold); restore version {culprit.from_version} or wait for a fixed release, then "
                   "re-activate it")


async def _left_as_it_is(step: UpdateType, applied: list[PlanItem], board: Switchboard, status: ContainmentStatus,
                         why: str) -> Containment:
    gone = await board.child_unreachable()
    if gone is not None:
        return unreachable(step, applied, gone)
    return Containment(step=step, status=status, detail=why,
                       next_steps=f"roll back by hand: {restore_steps(applied)}")


def unreachable(step: UpdateType, applied: list[PlanItem], why: str) -> Containment:
    return Containment(
        step=step, status=ContainmentStatus.unreachable,
        detail=f"after the {step.value} updates the site's pages fail and its MainWP Child does not answer ({why})",
        next_steps=f"on the server: {restore_steps(applied)}; then run `fleet check` or wait for the next night")
