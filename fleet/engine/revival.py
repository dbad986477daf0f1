"""A site dead at load revived through its Fleet Guard: the night stands outside the failing plugin.

A site that fails its probe after a step and whose MainWP Child no longer answers (a fatal while WordPress loads)
cannot be helped through the dashboard. When its guard answers (and can be counted on), the night:
1. bisects the step's releases on the dead site itself: the guard runs the page with halves of them left out;
2. pauses the culprit (the guard leaves it out of every request): the site is up and its child answers again;
3. switches the culprit off through the dashboard, then lifts the pause;
4. puts back the version the guard kept before tonight's update and switches it on through the dashboard;
5. checks the site again (its page and its child), and re-syncs it.
Only the culprit is held; the step's other releases stay updated and go on to other sites. Without a guard, or
with one the night cannot count on, the site stays as it is (alerted, what to do by hand), with the reason.
Themes: the page is run with the theme left out, and the kept theme put back. Core is out of the guard's reach.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fleet.engine.culprit import ChildUnreachable, Switchboard, bisect, suspect_of
from fleet.model.summary import Containment, ContainmentStatus, UpdateType
from fleet.model.vocabulary import count
from fleet.rules.plan import PlanItem
from fleet.rules.policy import ContainMode, Policy
from guard.client import GuardClient, GuardError, GuardSite
from guard.models import GuardStatus


@dataclass
class GuardLine:
    """One site's guard, for the night: the client and where the site is."""

    client: GuardClient
    site: GuardSite

    async def status(self) -> GuardStatus:
        return await self.client.status(self.site)

    async def up_without(self, plugins: list[str], theme: bool = False) -> tuple[bool, str]:
        answer = await self.client.probe(self.site, plugins, theme)
        return answer.up, answer.said

    async def pause(self, plugins: list[str]) -> None:
        await self.client.pause(self.site, plugins)

    async def unpause(self, plugins: list[str]) -> None:
        await self.client.unpause(self.site, plugins)

    async def restore(self, type_: str, slug: str, version: str) -> str:
        return (await self.client.restore(self.site, type_, slug, version)).installed


@dataclass
class ProbeBoard:
    """The bisection's switchboard on a dead site: "deactivating" leaves plugins out of the guard's probe."""

    guard: GuardLine
    left_out: set[str] = field(default_factory=set)
    said: list[str] = field(default_factory=list)

    async def deactivate(self, slugs: list[str]) -> None:
        self.left_out |= set(slugs)

    async def activate(self, slugs: list[str]) -> None:
        self.left_out -= set(slugs)

    async def home_page_ok(self) -> bool:
        up, said = await self.guard.up_without(sorted(self.left_out))
        self.said.append(f"without {', '.join(sorted(self.left_out)) or 'nothing'}: {said}")
        return up


@dataclass
class Revival:
    """What the revival did, step by step (the incident's evidence), and what it cost: seconds, and the requests
    to the dashboard and to the guard (counted where the switchboard and the guard's client count them)."""

    board: object = None
    guard: GuardLine | None = None
    steps: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    dashboard_calls: int = field(init=False, default=0)
    guard_calls: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.dashboard_calls = getattr(self.board, "calls", 0)
        self.guard_calls = self.guard.client.calls if self.guard is not None else 0

    @property
    def cost(self) -> str:
        dashboard = getattr(self.board, "calls", 0) - self.dashboard_calls
        guard = (self.guard.client.calls if self.guard is not None else 0) - self.guard_calls
        return (f"{time.monotonic() - self.started:.1f} s, {count(dashboard, 'dashboard request')} and "
                f"{count(guard, 'guard request')}")

    def saw(self, step: str) -> None:
        self.steps.append(f"{len(self.steps) + 1}. {step}")

    @property
    def told(self) -> str:
        return "; ".join(self.steps)


async def revive(step: UpdateType, applied: list[PlanItem], policy: Policy, guard: GuardLine | None,
                 board: Switchboard, dead: Containment) -> Containment:
    """A site `dead` after `step` (its child does not answer), brought back through its guard when it can be;
    otherwise `dead` with the reason the night cannot revive it."""
    if step not in (UpdateType.plugin, UpdateType.theme):
        return cannot(dead, f"{step.value} updates are out of the guard's reach: only plugins and themes can be "
                            "left out or put back")
    if policy.contain is ContainMode.report:
        return cannot(dead, "the policy says report (contain: report): nothing is left out or switched off")
    if guard is None:
        return cannot(dead, "no guard key is set (FLEET_GUARD_KEY: `fleet guard keygen`)")
    told = Revival(board, guard)
    try:
        status = await guard.status()
    except GuardError as error:
        return cannot(dead, f"its guard does not answer ({str(error).split(': ', 2)[-1]})")
    if status.unusable is not None:
        return cannot(dead, status.unusable)
    rotated = " (to the key before the rotation)" if status.key == "previous" else ""
    told.saw(f"its guard {status.version} answered{rotated}")
    try:
        if step is UpdateType.theme:
            return await _revive_theme(applied, guard, board, status, dead, told)
        return await _revive_plugins(applied, policy, guard, board, status, dead, told)
    except (GuardError, ChildUnreachable) as error:
        told.saw(f"stopped: {error}")
        return cannot(dead, f"the revival stopped: {error}", told)


async def _revive_plugins(applied: list[PlanItem], policy: Policy, guard: GuardLine, board: Switchboard,
                          status: GuardStatus, dead: Containment, told: Revival) -> Containment:
    suspects = [item for item in applied if item.type is UpdateType.plugin and item.slug in status.plugins
                and policy.may_deactivate(item.slug)]
    if not suspects:
        return cannot(dead, "none of the step's plugins may be left out (never_deactivate) or is installed", told)
    probes = ProbeBoard(guard)
    found = await bisect([item.slug for item in suspects], probes)
    told.saw("the page with halves of the step's plugins left out: " + "; ".join(probes.said))
    if found.culprit is None:
        return cannot(dead, f"leaving out the {count(len(suspects), 'updated plugin')} one half at a time did not "
                            "bring the page back", told)
    culprit = next(item for item in suspects if item.slug == found.culprit)
    name = culprit.name or culprit.slug
    await guard.pause([culprit.slug])
    up, child = await board.home_page_ok(), await board.child_unreachable()
    told.saw(f"{name} {culprit.to_version} paused: the page {'answers' if up else 'still fails'}, the child "
             f"{'answers' if child is None else f'does not answer ({child})'}")
    if not up or child is not None:
        return cannot(dead, f"with {name} paused the site is still not up", told)
    await board.deactivate([culprit.slug])
    await guard.unpause([culprit.slug])
    told.saw(f"{name} switched off through the dashboard, the pause lifted")
    contained = Containment(
        step=UpdateType.plugin, status=ContainmentStatus.contained, culprit=suspect_of(culprit), rounds=found.rounds,
        next_steps=f"{name} stays deactivated (its version {culprit.to_version} is held): restore version "
                   f"{culprit.from_version} or wait for a fixed release, then re-activate it")
    back = culprit.from_version or ""
    if back not in status.kept_versions("plugin", culprit.slug):
        told.saw(f"no kept version {back or '(unknown)'} of {name} to put back (the guard keeps versions from its "
                 "install on)")
        return _with(contained, told, f"{name} {culprit.to_version} broke the site at load; revived by the night "
                                      f"with {name} left deactivated")
    try:
        installed = await guard.restore("plugin", culprit.slug, back)
    except GuardError as error:
        told.saw(f"putting {name} {back} back failed: {error}")
        return _with(contained, told, f"{name} {culprit.to_version} broke the site at load; revived by the night "
                                      f"with {name} left deactivated")
    await board.activate([culprit.slug])
    up, child = await board.home_page_ok(), await board.child_unreachable()
    told.saw(f"{name} {installed} put back from the guard's keep and switched on: the page "
             f"{'answers' if up else 'fails'}, the child {'answers' if child is None else f'does not ({child})'}")
    if not up or child is not None:
        await board.deactivate([culprit.slug])
        told.saw(f"{name} switched off again")
        return _with(contained, told, f"{name} {back} put back did not work; {name} left deactivated")
    return _with(Containment(
        step=UpdateType.plugin, status=ContainmentStatus.revived, culprit=suspect_of(culprit), rounds=found.rounds,
        next_steps=f"nothing tonight: {name} {back} is back and active; {culprit.to_version} is held (fleet holds "
                   "list) until a fixed release"),
        told, f"{name} {culprit.to_version} killed the site at load; revived by the night with {name} {back}")


async def _revive_theme(applied: list[PlanItem], guard: GuardLine, board: Switchboard, status: GuardStatus,
                        dead: Containment, told: Revival) -> Containment:
    themes = [item for item in applied if item.type is UpdateType.theme and item.slug == status.theme]
    if not themes:
        return cannot(dead, "the updated theme is not the active one", told)
    theme = themes[0]
    up, said = await guard.up_without([], theme=True)
    told.saw(f"the page with the theme left out: {said}")
    if not up:
        return cannot(dead, "the page fails with the theme left out too", told)
    back = theme.from_version or ""
    if back not in status.kept_versions("theme", theme.slug):
        return cannot(dead, f"the guard keeps no version {back or '(unknown)'} of the theme {theme.name or theme.slug}",
                      told)
    installed = await guard.restore("theme", theme.slug, back)
    up, child = await board.home_page_ok(), await board.child_unreachable()
    told.saw(f"{theme.name or theme.slug} {installed} put back from the guard's keep: the page "
             f"{'answers' if up else 'fails'}, the child {'answers' if child is None else f'does not ({child})'}")
    if not up or child is not None:
        return cannot(dead, "putting the kept theme back did not bring the site up", told)
    return _with(Containment(
        step=UpdateType.theme, status=ContainmentStatus.revived, culprit=suspect_of(theme),
        next_steps=f"nothing tonight: {theme.name or theme.slug} {back} is back; {theme.to_version} is held"),
        told, f"{theme.name or theme.slug} {theme.to_version} killed the site at load; revived by the night with "
              f"{back}")


def _with(containment: Containment, told: Revival, headline: str) -> Containment:
    return containment.model_copy(update={"detail": f"{headline} ({told.cost}): {told.told}"})


def cannot(dead: Containment, why: str, told: Revival | None = None) -> Containment:
    """The dead site left as it is, saying why the night cannot revive it (and what it tried)."""
    tried = f" (tried: {told.told})" if told is not None and told.steps else ""
    return dead.model_copy(update={"detail": f"{dead.detail}; the night cannot revive it: {why}{tried}"})

