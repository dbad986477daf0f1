"""Containment's `Switchboard` on a real site: its plugins switched through the dashboard, its home page probed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import httpx

from dashboard.errors import ChildOutdated, DashboardError, SiteOffline
from dashboard.models import PluginSwitch
from fleet.engine.culprit import ChildUnreachable
from fleet.engine.site_probe import probe_home_page, probe_url
from fleet.engine.visual_watch import VisualWatch
from fleet.model.settings import PipelineSettings
from fleet.model.summary import UpdateType
from fleet.rules.plan import SiteRecord
from fleet.rules.sync_failures import refused_since_a_failed_sync

if TYPE_CHECKING:
    from dashboard.client import DashboardClient


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
