"""After each update step: probe the sites it touched, and contain the ones it broke (the culprit deactivated, or
the operator alerted at once when the site's MainWP Child no longer answers); on the way back, the fixed release of
a deactivated culprit is switched on first."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from prefect import task

from dashboard.errors import ChildOutdated, DashboardError, SiteOffline
from dashboard.models import PluginSwitch
from fleet.engine.containment import TonightsBreaks, newly_broken
from fleet.engine.culprit import ChildUnreachable, contain_site, restore_steps, switch_on_failed
from fleet.engine.guard_roll import guard_site
from fleet.engine.revival import GuardLine, revive
from fleet.engine.site_probe import ProbeResult, probe_before_updates, probe_client, probe_home_page, probe_url
from fleet.engine.visual_watch import VISUAL_STEPS, VisualWatch
from fleet.model.events import site_events
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Band, Containment, ContainmentStatus, UpdateType
from fleet.pacing.fan_out import fan_out
from fleet.rules.breakage import site_page
from fleet.rules.execution import CallResult, JobOutcome
from fleet.rules.plan import PlanItem, SiteRecord
from fleet.rules.policy import Policy
from fleet.rules.sync_failures import refused_since_a_failed_sync
from fleet.visual.policy import ReviewMode
from guard.client import GuardClient
from guard.keys import GuardKeyMissing, load_keys
from orchestration.events import emit
from orchestration.retries import STEP_OPTIONS
from reporting.alert import BreakNotice, dashboard_name, deliver_alert, release_of, run_link
from reporting.settings import MailSettings, notify_block_alone

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

log = logging.getLogger("fleet.contain")


class DashboardSwitchboard:
    """One site's plugins switched through the dashboard, its home page probed with a plain GET (and, for a
    site that looked broken, its pages shot again and judged)."""

    def __init__(self, client: DashboardClient, site: SiteRecord, http: httpx.AsyncClient,
                 settings: PipelineSettings, looks: tuple[VisualWatch, UpdateType] | None = None) -> None:
        self.client, self.site, self.http, self.settings, self.looks = client, site, http, settings, looks
        self.calls = 0  # requests sent to the dashboard, for the revival's figures

    async def active_plugins(self) -> set[str]:
        self.calls += 1
        try:
            return {plugin.slug for plugin in await self.client.site_plugins(self.site.id) if plugin.active}
        except ChildOutdated as error:  # the dashboard cannot switch anything on it either
            raise ChildUnreachable(refused_since_a_failed_sync(error)) from error

    async def deactivate(self, slugs: list[str]) -> None:
        await self._switch(self.client.deactivate_plugins, slugs)

    async def activate(self, slugs: list[str]) -> None:
        await self._switch(self.client.activate_plugins, slugs)

    async def _switch(self, call: Callable[[int, list[str]], Awaitable[PluginSwitch]], slugs: list[str]) -> None:
        self.calls += 1
        try:
            answer = await call(self.site.id, slugs)
        except SiteOffline as error:  # the child did not answer (NOMAINWP, known offline, no connection to it)
            raise ChildUnreachable(str(error)) from error  # any other error is the dashboard's: containing it fails
        except ChildOutdated as error:
            raise ChildUnreachable(refused_since_a_failed_sync(error)) from error
        if not answer.switched and answer.errors:  # every plugin failed: the child did not answer
            raise ChildUnreachable("; ".join(sorted({error.message or error.code for error in answer.errors})))

    async def home_page_ok(self) -> bool:
        if not (await probe_home_page(self.http, probe_url(self.site.url, self.settings.probe_url_template))).ok:
            return False
        return self.looks is None or not await self.looks[0].still_broken(self.site, self.looks[1])

    async def child_unreachable(self) -> str | None:
        """Why the child does not answer a sync, or None. A site the dashboard keeps as known offline (a check
        failed while it was down) is checked once first: only a passing check lets the dashboard reach it; one it
        refuses as "child outdated" (a sync failed while it was down, which zeroes MainWP's record of the child)
        is reconnected first."""
        why = await self._sync()
        if why is not None and why[0].endswith("site_offline"):
            self.calls += 1
            try:
                await self.client.check_sites([self.site.id])
            except DashboardError as error:
                return str(error)
            why = await self._sync()
        if why is not None and why[0].endswith("child_outdated"):  # a sync of the dead site lost MainWP's record
            self.calls += 1  # of its child: only a reconnect records it again
            try:
                await self.client.reconnect_site(self.site.id)
            except DashboardError as error:
                return f"{why[1]}; reconnecting it failed: {error}"
            why = await self._sync()
        return None if why is None else why[1]

    async def _sync(self) -> tuple[str, str] | None:
        self.calls += 1
        try:
            answer = await self.client.sync_sites([self.site.id])
        except DashboardError as error:
            return "", str(error)
        errors = list(answer.errors) + (list(answer.result.errors) if answer.result else [])
        if not errors:
            return None
        code = errors[0].code or ""
        if code.endswith("child_outdated"):
            return code, refused_since_a_failed_sync(errors[0].message or code)
        return code, "; ".join(error.message or error.code for error in errors)


async def probe_and_contain(
    client: DashboardClient, before: dict[int, ProbeResult], sites: list[SiteRecord], step: UpdateType,
    sent: list[PlanItem], breaks: TonightsBreaks, policy: Policy, run_id: str, settings: PipelineSettings,
    watch: VisualWatch | None = None,
) -> dict[int, Containment]:
    """Probe the sites `step` sent items to (and, with the policy's `visual:`, look at their pages); each that
    passed before the night and fails now, or now looks broken, is contained (`fleet.engine.culprit`) and joins
    tonight's breaks; one that looks different (review) sends the versions it got to the approval gate. Returns
    what was done per broken site."""
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
            emit(site_events(base, site.id, site.name, site.url, containment, run_id, site_page(base, site.id)))
            await alert_break(client, site, containment, applied, run_id, settings.report_dir)
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


async def alert_break(client: DashboardClient, site: SiteRecord, containment: Containment, applied: list[PlanItem],
                      run_id: str, report_dir: Path) -> list[str]:
    """The operator's one message about this break, now rather than at the end of the night (mail, or `.eml` under
    the alerts folder, and the chat): the site, the release, what the night did, what to do."""
    base = client.settings.base_url
    notice = BreakNotice.of(containment, run_name=run_id, dashboard=dashboard_name(base), site_id=site.id,
                            site=f"{site.name} ({site.url})", release=release_of(containment, applied),
                            dashboard_page=site_page(base, site.id), run_url=run_ui_url())
    return await deliver_alert(notice, night_mail_settings("break alert"), report_dir / "alerts")


def night_mail_settings(what: str) -> MailSettings:
    """The mail settings for an alert sent during the night; bad ones must not stop it (the file is still written)."""
    try:
        return MailSettings()
    except ValueError as error:
        log.error("%s: mail settings unusable (%s): only the file is written", what, error)
        return MailSettings.model_construct(smtp_host=None, report_to=[], alert_blocks=[],
                                            notify_block=notify_block_alone())


def run_ui_url() -> str | None:
    """This flow run's page in the Prefect UI (None outside a run, or without a UI URL), as every message links it."""
    from prefect.runtime import flow_run

    return run_link(flow_run.id)


async def switch_on_fixed_releases(
    client: DashboardClient, sent: list[PlanItem], calls: list[CallResult], jobs: list[JobOutcome],
    breaks: TonightsBreaks, sites: list[SiteRecord], run_id: str = "", report_dir: Path = Path("."),
) -> list[PlanItem]:
    """The way back: switch on each deactivated culprit whose fixed release the dashboard answered installed (one
    still at the bad version stays off). A release that cannot be switched on (an error answer, such as the 500
    NOMAINWP of a release fatal at load, or an answer that leaves it off) is a break: it stays off, joins tonight's
    breaks (its site gets nothing more, the version goes nowhere else, the night holds it), the operator hears of
    it at once (run `run_id`, alerts under `report_dir`) and the incident tells it. Returns the items switched on;
    the probe after the step judges them."""
    reports = [report for answer in [*calls, *jobs] for report in answer.reports]
    installed = {(report.site_id, report.slug) for report in reports if report.ok and report.slug is not None}
    by_id = {site.id: site for site in sites}
    names = {site.id: site.name for site in sites}
    switched = []
    for item in sent:
        if (item.site_id, item.slug) not in installed:
            log.warning("site %d: %s %s was not answered installed: it stays deactivated", item.site_id,
                        item.name or item.slug, item.to_version)
            continue
        try:
            answer = await client.activate_plugins(item.site_id, [item.slug])
        except DashboardError as error:
            why = str(error)
        else:
            if item.slug in answer.switched:
                log.info("site %d: %s %s installed and switched on (the way back)", item.site_id,
                         item.name or item.slug, item.to_version)
                switched.append(item)
                continue
            why = "; ".join(sorted({e.message or e.code for e in answer.errors})) or "the dashboard left it off"
        containment = switch_on_failed(item, why)
        breaks.learn_break(item.site_id, names.get(item.site_id, str(item.site_id)), containment, [item])
        log.warning("site %d: %s", item.site_id, containment.detail)
        if run_id:
            await alert_break(client, by_id[item.site_id], containment, [item], run_id, report_dir)
    return switched


probe_and_contain_task = task(probe_and_contain, name="probe-after-step", **STEP_OPTIONS)
switch_on_fixed_releases_task = task(switch_on_fixed_releases, name="switch-on-fixed-releases", **STEP_OPTIONS)
