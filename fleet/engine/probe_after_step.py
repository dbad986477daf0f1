"""After each update step: probe the sites it touched, and contain the ones it broke (the culprit deactivated, or
the operator alerted at once when the site's MainWP Child no longer answers, a site dead at load revived through its
Fleet Guard)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import httpx

from dashboard.errors import DashboardError
from fleet.engine.containment import TonightsBreaks, newly_broken
from fleet.engine.culprit import contain_site, restore_steps
from fleet.engine.dashboard_switchboard import DashboardSwitchboard
from fleet.engine.guard_roll import guard_site
from fleet.engine.outbox import Outbox
from fleet.engine.revival import GuardLine, revive
from fleet.engine.site_probe import ProbeResult, probe_before_updates, probe_client
from fleet.engine.visual_watch import VISUAL_STEPS, VisualWatch
from fleet.model.events import site_events
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Band, Containment, ContainmentStatus, UpdateType
from fleet.pacing.fan_out import fan_out
from fleet.rules.breakage import site_page
from fleet.rules.plan import PlanItem, SiteRecord
from fleet.rules.policy import Policy
from fleet.visual.policy import ReviewMode
from guard.client import GuardClient
from guard.keys import GuardKeyMissing, load_keys

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

log = logging.getLogger("fleet.contain")


async def probe_and_contain(
    client: DashboardClient, before: dict[int, ProbeResult], sites: list[SiteRecord], step: UpdateType,
    sent: list[PlanItem], breaks: TonightsBreaks, policy: Policy, run_id: str, settings: PipelineSettings,
    watch: VisualWatch | None = None,
    *,
    outbox: Outbox,
) -> dict[int, Containment]:
    """Probe the sites `step` sent items to (and, with the policy's `visual:`, look at their pages); each that
    passed before the night and fails now, or now looks broken, is contained (`fleet.engine.culprit`) and joins
    tonight's breaks; one that looks different (review) sends the versions it got to the approval gate. Each break
    is told at once through the `outbox` (its events, the operator's alert). Returns what was done per broken site."""
    touched = {item.site_id for item in sent}
    stepped = [site for site in sites if site.id in touched]
    after = await probe_before_updates(stepped, settings)
    broken = newly_broken(before, after)
    saw = {site_id: after[site_id].error or "the home page failed" for site_id in broken}
    looked_broken = await look_after_step(watch, [site for site in stepped if site.id not in broken], step, sent,
                                          breaks, policy)
    saw |= looked_broken
    by_id = {site.id: site for site in stepped}

    async with probe_client(settings) as http:
        guards = night_guards(http)

        async def contain(site_id: int) -> tuple[int, Containment]:
            site = by_id[site_id]
            applied = [item for item in sent if item.site_id == site_id]
            looks = (watch, step) if watch is not None and site_id in looked_broken else None
            board = DashboardSwitchboard(client, site, http, settings, looks)
            try:
                containment = await contain_site(step, applied, policy, board)
                if containment.status is ContainmentStatus.unreachable:  # dead at load: its guard, if it has one
                    line = GuardLine(guards, guard_site(site.url, settings)) if guards is not None else None
                    containment = await revive(step, applied, policy, line, board, containment)
            except DashboardError as error:  # the site stays broken and reported; the night goes on
                containment = Containment(step=step, status=ContainmentStatus.not_contained,
                                          detail=f"containing it failed: {error}",
                                          next_steps=f"roll back by hand: {restore_steps(applied)}")
            containment.saw = saw[site_id]
            breaks.learn_break(site_id, site.name, containment, applied)
            log.warning("site %s broke after the %s updates: %s: %s", site.name, step.value, containment.headline,
                        containment.detail)
            base = client.settings.base_url
            outbox.emit(site_events(base, site.id, site.name, site.url, containment, run_id,
                                    site_page(base, site.id)))
            await outbox.alert_break(client, site, containment, applied, run_id, settings.report_dir)
            return site_id, containment

        return dict(await fan_out(sorted(saw), contain, settings.probe_concurrency))


def night_guards(http: httpx.AsyncClient) -> GuardClient | None:
    """The client of the sites' Fleet Guards, signing with the fleet's key (None: no key is set)."""
    try:
        return GuardClient(http, load_keys())
    except GuardKeyMissing:
        return None
    except ValueError as error:  # a key that cannot be read: said, and the night goes on without the guards
        log.error("the guard key cannot be used (%s): no site can be revived tonight", error)
        return None


async def look_after_step(watch: VisualWatch | None, sites: list[SiteRecord], step: UpdateType,
                          sent: list[PlanItem], breaks: TonightsBreaks, policy: Policy) -> dict[int, str]:
    """The watched sites' looks after `step`: {site id: what was seen} of those that look broken; the versions
    that made a site look different wait for a person (`visual: {review: gate}`)."""
    if watch is None or step not in VISUAL_STEPS:
        return {}
    looks = await watch.look_after(sites, step)
    gate = policy.visual is not None and policy.visual.review is ReviewMode.gate
    for site_id, look in looks.items():
        if look.band is Band.review:
            log.warning("site %s looks different after the %s updates: %s", look.site_name, step.value,
                        look.headline)
            if gate:
                breaks.learn_review(look, [item for item in sent if item.site_id == site_id])
    return {site_id: look.headline for site_id, look in looks.items() if look.band is Band.broken}
