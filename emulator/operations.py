"""Work on sites, in ONE place for REST v2, v1, the abilities and background jobs: sync, check, updates with
per-item results, connection and suspension, and the ground-truth switches tests use to make things fail.

Every operation that talks to a child takes its modelled time on the worker of the request that asked for it
(`Capacity.work`); the sites of one request are worked one after another, as the dashboard's PHP loops do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from emulator.capacity import Capacity
from emulator.guard import keep_before_update
from emulator.records import Item, ItemType, Site
from emulator.rollbacks import remember_rollback
from emulator.state import FleetState

Outcome = Literal["updated", "failed", "silent", "stale"]
FaultMode = Literal["fail", "silent", "break", "load", "rollback"]
KNOWN_OFFLINE = "Site is known to be offline."
# A child that fatals while WordPress loads answers 500 with the critical-error page and no <mainwp> reply:
# MainWP_Connect::fetch_url raises NOMAINWP and the sync stores MainWP_Error_Helper::get_error_not_detected_connect.
CHILD_NOT_DETECTED = (
    "MainWP Child plugin not detected or could not be reached! Ensure the MainWP Child plugin is installed and "
    "activated on the child site, and there are no security rules blocking requests.  If you continue experiencing "
    'this issue, check the <a href="https://community.mainwp.com/c/community-support/5" target="_blank">MainWP '
    "Community</a> for help."
)
HTTP_ERROR_DETAIL = "cURL error 7: Failed to connect to the child site."


class SiteUnavailable(Exception):
    """The child cannot be reached (offline or disconnected): the whole site operation fails.

    `thrown` is the `MainWP_Exception` message `MainWP_Connect::fetch_url` throws when the child gave no MainWP
    answer: "NOMAINWP" (a page without `<mainwp>`, such as WordPress's critical-error page of a child dead at
    load), "HTTPERROR" (no HTTP answer at all); None when the child answered with its own error (disconnected).
    Every caller that does not catch it (an ability's callback, a REST handler) answers with that word alone.
    """

    def __init__(self, site: Site, message: str, thrown: str | None = None) -> None:
        super().__init__(message)
        self.site = site
        self.message = message
        self.thrown = thrown

    @property
    def console_message(self) -> str:
        """`MainWP_Error_Helper::get_console_error_message`: what a handler that catches it prints."""
        if self.thrown == "HTTPERROR":
            return f"HTTP error - {HTTP_ERROR_DETAIL}"
        return self.message


class SiteSuspended(Exception):
    def __init__(self, site: Site) -> None:
        super().__init__(f"site {site.id} is suspended")
        self.site = site


@dataclass(slots=True)
class ItemResult:
    """One item of an update run. `silent` and `stale` are reported as success although nothing moved."""

    site_id: int
    type: ItemType
    slug: str
    name: str
    old_version: str
    new_version: str
    outcome: Outcome
    error: str = ""

    @property
    def reported_success(self) -> bool:
        return self.outcome != "failed"


@dataclass(slots=True)
class SiteRun:
    """All update results of one site in a multi-site run; `error` when the whole site failed."""

    site: Site
    results: list[ItemResult]
    error: str = ""


@dataclass(slots=True)
class SyncResult:
    site: Site
    ok: bool
    error: str = ""


@dataclass(slots=True)
class CheckResult:
    site: Site
    online: bool
    http_code: int
    response_ms: int


def site_unavailable_reason(site: Site) -> str | None:
    """What the dashboard records as the site's `sync_errors` when its child cannot be reached; None: it can."""
    unavailable = unavailable_child(site)
    return unavailable.message if unavailable is not None else None


def unavailable_child(site: Site) -> SiteUnavailable | None:
    """Why a call to the site's child fails, as the dashboard would find out; None: the child answers."""
    if not site.reachable:
        return SiteUnavailable(site, f"ERROR: HTTP error: {HTTP_ERROR_DETAIL}", "HTTPERROR")
    if site.dead_at_load:
        return SiteUnavailable(site, CHILD_NOT_DETECTED, "NOMAINWP")
    if not site.child_connected:
        return SiteUnavailable(site, "ERROR: The child site is not connected to this dashboard. Reconnect it.")
    return None


def page_status(site: Site) -> int:
    """The HTTP status a visitor (or the dashboard's check) gets from the site's pages; 0: no answer."""
    if not site.reachable:
        return 0
    return 500 if site.front_end_broken else site.http_code


class SiteOperations:
    """Site operations on the shared state; async because each one takes modelled time on a worker."""

    def __init__(self, state: FleetState, capacity: Capacity) -> None:
        self.state = state
        self.capacity = capacity

    # ---- sync and check ------------------------------------------------------------------------------------

    async def sync(self, site: Site) -> SyncResult:
        """Refresh the dashboard's stored copy from the child; an unreachable child records `sync_errors`. A site
        known offline is refused before any call to it: only a check that succeeds clears the flag."""
        if site.offline_check_result == -1:
            return SyncResult(site, False, KNOWN_OFFLINE)
        await self.capacity.work("sync", site_id=site.id)
        reason = site_unavailable_reason(site)
        if reason is not None:
            self._record_failed_sync(site, reason)
            return SyncResult(site, False, reason)
        self._record_sync(site)
        return SyncResult(site, True)

    def _record_sync(self, site: Site) -> None:
        """What a sync the child answered stores: its lists, its plugin's version, no error."""
        site.known_wp_version, site.known_wp_offer = site.wp_version, site.wp_offer
        for items in (site.plugins, site.themes, site.translations):
            for item in items.values():
                item.known_version, item.known_offer = item.version, item.offer
        site.synced_child_version = site.child_version
        site.sync_errors = ""
        site.last_sync = self.state.now()
        self.state.save_site(site)

    def _record_failed_sync(self, site: Site, reason: str) -> None:
        """`sync_information_array` starts from version 0 and only the child's answer sets it: a sync the child
        did not answer records 0, so the abilities' child-version gate refuses the site from then on."""
        site.sync_errors = reason
        site.synced_child_version = "0"
        self.state.save_site(site)

    async def sync_many(self, sites: list[Site]) -> list[SyncResult]:
        return [await self.sync(s) for s in sites]

    async def check(self, site: Site) -> CheckResult:
        """An HTTP check of the site itself (not the child connection): a critical-error page answers 500, and the
        site is then known offline (`offline_check_result` -1) until a check succeeds."""
        await self.capacity.work("check", site_id=site.id)
        code = page_status(site)
        online = 200 <= code < 300
        site.offline_check_result = 1 if online else -1
        site.last_check = self.state.now()
        self.state.save_site(site)
        return CheckResult(site, online, code, site.response_ms)

    async def check_many(self, sites: list[Site]) -> list[CheckResult]:
        return [await self.check(s) for s in sites]

    # ---- updates -------------------------------------------------------------------------------------------

    def update_candidates(
        self, site: Site, item_type: ItemType, slugs: list[str] | None, respect_ignores: bool = True
    ) -> list[str]:
        """The slugs a run would try: the requested ones that the dashboard lists as pending (all when None)."""
        listed = [u.slug for u in self.state.pending_updates(site, (item_type,), respect_ignores=respect_ignores)]
        if slugs is None:
            return listed
        wanted = set(slugs)
        return [slug for slug in listed if slug in wanted]

    async def update_items(
        self,
        site: Site,
        item_type: ItemType,
        slugs: list[str] | None = None,
        *,
        respect_ignores: bool = True,
        refresh_stored: bool = True,
    ) -> list[ItemResult]:
        """Update items of one type on one site; per-item outcomes. Raises SiteSuspended / SiteUnavailable."""
        if site.suspended:
            raise SiteSuspended(site)
        if site.offline_check_result == -1:
            raise SiteUnavailable(site, KNOWN_OFFLINE)
        unavailable = unavailable_child(site)
        if unavailable is not None:
            raise unavailable
        candidates = self.update_candidates(site, item_type, slugs, respect_ignores)
        if not candidates:
            return []
        await self.capacity.work("update_item", units=len(candidates), site_id=site.id)
        results = [self._apply(site, item_type, slug, refresh_stored) for slug in candidates]
        self.state.save_site(site)
        return results

    async def update_site(
        self,
        site: Site,
        types: tuple[ItemType, ...] = ("wp", "plugin", "theme", "translation"),
        *,
        respect_ignores: bool = True,
        refresh_stored: bool = True,
    ) -> list[ItemResult]:
        results: list[ItemResult] = []
        for item_type in types:
            results += await self.update_items(
                site, item_type, None, respect_ignores=respect_ignores, refresh_stored=refresh_stored
            )
        return results

    async def update_sites(
        self,
        sites: list[Site],
        types: tuple[ItemType, ...] = ("wp", "plugin", "theme", "translation"),
        *,
        respect_ignores: bool = True,
        refresh_stored: bool = True,
    ) -> list[SiteRun]:
        """Update several sites one after another, as the dashboard's loop does; a suspended or unreachable
        site becomes a SiteRun with `error` instead of stopping the run."""

        async def one(site: Site) -> SiteRun:
            try:
                return SiteRun(
                    site,
                    await self.update_site(site, types, respect_ignores=respect_ignores, refresh_stored=refresh_stored),
                )
            except SiteSuspended:
                return SiteRun(site, [], "The site is suspended.")
            except SiteUnavailable as error:
                return SiteRun(site, [], error.message)

        return [await one(s) for s in sites]

    @staticmethod
    def _apply(site: Site, item_type: ItemType, slug: str, refresh_stored: bool) -> ItemResult:
        """Move one item to its offered version unless a fault says otherwise (core through its `Item` view)."""
        core = item_type == "wp"
        item: Item = site.core_item() if core else site.items(item_type)[slug]
        versioned = item_type != "translation"  # a translation pack reports no versions

        def result(old: str, new: str, outcome: Outcome, error: str = "") -> ItemResult:
            return ItemResult(site.id, item_type, slug, item.name, old, new, outcome, error)

        key = f"{item_type}:{slug}"
        fault = site.fail_items.get(key)
        if fault == "fail":
            return result(item.version, item.version, "failed", "Core update failed." if core else "Download failed.")
        if fault == "silent":
            return result(item.version, item.known_offer or "", "silent")
        if item.offer is None:
            return result("", item.version, "stale")
        if fault == "rollback" and item_type in ("plugin", "theme"):
            return result(item.version, item.version, "failed", remember_rollback(site, item_type, item))
        old = item.version
        keep_before_update(site, item_type, slug, old)  # its guard, if armed, keeps the installed version first
        if versioned:
            item.version = item.offer
        item.offer = None
        if refresh_stored:
            item.known_version, item.known_offer = item.version, None
        if core:
            site.set_core_item(item)
        if fault == "break":  # a bad release: installed fine, the front end now dies with a fatal error
            site.broken_by = key
            del site.fail_items[key]
        elif fault == "load":  # installed and reported updated; from the next request on, WordPress dies loading
            site.fatal_by = key
            del site.fail_items[key]
        elif site.broken_by == key:  # the next release of the culprit fixes it
            site.broken_by = ""
        site.rollbacks.get(item_type, {}).get(slug, {}).pop(item.version, None)  # that version installed after all
        return result(old, item.version if versioned else "", "updated")

    # ---- plugins ---------------------------------------------------------------------------------------------

    async def set_plugins_active(self, site: Site, slugs: list[str], active: bool) -> list[Item]:
        """(De)activate installed plugins on the child; the plugins it changed. A plugin that broke the front end
        stops breaking it once deactivated (and breaks it again when re-activated). Raises SiteUnavailable: a
        child dead at load cannot be asked anything, however the dashboard asks."""
        unavailable = unavailable_child(site)
        if unavailable is not None:
            raise unavailable
        await self.capacity.work("plugin_action", site_id=site.id)
        changed = [site.plugins[slug] for slug in slugs if slug in site.plugins]
        for item in changed:
            if active and not item.active and site.fatal_by == f"plugin:{item.slug}":
                # WordPress switches a plugin on by loading it first (`activate_plugin`'s sandbox): a release fatal at
                # load dies there, before the option is written. The plugin stays off and the pages stay up, and the
                # child's answer is the fatal's output, no <mainwp> reply: fetch_url throws NOMAINWP.
                self.state.save_site(site)
                raise SiteUnavailable(site, CHILD_NOT_DETECTED, "NOMAINWP")
            item.active = active
        self.state.save_site(site)
        return changed

    def repair(self, site: Site) -> str:
        """What an operator does by hand (renaming the culprit's plugin folder, which WordPress then deactivates):
        the site loads again. The dashboard still refuses it while it is known offline, until a check passes."""
        culprit = site.fatal_by or site.broken_by
        kind, _, slug = culprit.partition(":")
        if kind == "plugin" and slug in site.plugins:
            site.plugins[slug].active = False
        else:
            site.fatal_by = site.broken_by = ""
        self.state.save_site(site)
        return culprit

    # ---- connection and suspension -------------------------------------------------------------------------

    async def reconnect(self, site: Site) -> bool:
        """`m_reconnect_site`: a sync first, then the child's registration, whose answer is synced. A child that
        does not answer (unreachable, dead at load) fails both: the failed sync is recorded (version 0). A child
        that answers but was disconnected registers again: connected, synced, its version recorded."""
        await self.capacity.work("reconnect", site_id=site.id)
        unavailable = unavailable_child(site)
        if unavailable is not None and unavailable.thrown is not None:
            self._record_failed_sync(site, unavailable.message)
            return False
        site.child_connected = True
        self._record_sync(site)
        return True

    async def disconnect(self, site: Site, *, mark_local: bool = True) -> bool:
        """Tell the child to disconnect. The REST route changes nothing locally (mark_local=False), the
        abilities record `sync_errors="Manually disconnected"`."""
        await self.capacity.work("disconnect", site_id=site.id)
        if site.reachable:
            site.child_connected = False
        if mark_local:
            site.sync_errors = "Manually disconnected"
        self.state.save_site(site)
        return site.reachable

    def suspend(self, site: Site) -> None:
        site.suspended = True
        self.state.save_site(site)

    def unsuspend(self, site: Site) -> None:
        site.suspended = False
        self.state.save_site(site)

    # ---- ground truth switches (tests, benchmarks) ---------------------------------------------------------

    def set_item_fault(self, site: Site, item_type: ItemType, slug: str, mode: FaultMode | None) -> None:
        """Make the next runs of one item fail (a clear error), fail silently (success, version unmoved) or
        break the site's front end (success, then every page is WordPress's critical-error page), or kill it at
        load ("load": success, then the pages answer 500 and the child answers nothing)."""
        key = f"{item_type}:{slug}"
        if mode is None:
            site.fail_items.pop(key, None)
        else:
            site.fail_items[key] = mode
        self.state.save_site(site)

    def set_front_end_broken(self, site: Site, broken: bool) -> None:
        """Break the site's front end directly, or fix it whatever broke it."""
        site.broken_by = "ground-truth" if broken else ""
        if not broken:
            site.fatal_by = ""
        self.state.save_site(site)

    def set_reachable(self, site: Site, reachable: bool) -> None:
        """Take a site offline (every call to its child fails) or bring it back."""
        site.reachable = reachable
        site.http_code = 200 if reachable else 0
        self.state.save_site(site)
