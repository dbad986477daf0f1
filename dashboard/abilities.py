"""The Abilities API: catalog, the method rule, input encoding, running, and the ability-backed methods.

The HTTP method of `/run` comes from the ability's annotations (readonly -> GET, destructive and
idempotent -> DELETE, otherwise POST). GET and DELETE carry the input in the query string in PHP bracket
form (`input[types][0]=plugins`), POST carries `{"input": {...}}`. Whether a failed call may be retried
also comes from the annotations. Batch work across many sites goes through here because only the
abilities queue above the threshold and report job status.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from dashboard.connection import Connection, parse
from dashboard.errors import InvalidInput
from dashboard.models import (
    Ability,
    AbilityCategory,
    BatchStart,
    CheckResult,
    IgnoredList,
    IgnoredUpdate,
    IgnoreResult,
    JobStatus,
    PendingUpdate,
    PluginSwitch,
    SiteUpdates,
    SyncResult,
    UpdateError,
    UpdateListPage,
    UpdateRunResult,
    UpdateType,
    update_type_of,
)
from dashboard.pagination import Page, collect_pages

log = logging.getLogger("dashboard")

ABILITY_PAGE_SIZE = 100  # the catalog's maximum (101 answers 400)
QUERY_SITES = 100  # sites per GET call: the input travels in the query string, which servers cap (414)
_PLURAL = {UpdateType.core: "core", UpdateType.plugin: "plugins", UpdateType.theme: "themes",
           UpdateType.translation: "translations"}
SiteSelector = Sequence[int | str] | None


def query_pairs(value: Any, prefix: str = "input") -> list[tuple[str, str]]:
    """PHP bracket encoding of an input object: `input[a]=1&input[b][0]=x`, booleans as true/false."""
    pairs: list[tuple[str, str]] = []

    def walk(key: str, item: Any) -> None:
        if item is None:
            return
        if isinstance(item, dict):
            for name, sub in item.items():
                walk(f"{key}[{name}]", sub)
        elif isinstance(item, list | tuple):
            for index, sub in enumerate(item):
                walk(f"{key}[{index}]", sub)
        elif isinstance(item, bool):
            pairs.append((key, "true" if item else "false"))
        else:
            pairs.append((key, str(item)))

    walk(prefix, value)
    return pairs


def encode_input(ability: Ability, data: dict[str, Any] | None) -> tuple[list[tuple[str, str]] | None, Any]:
    """(query parameters, JSON body) for running `ability` with `data`, as its method needs."""
    schema_type = (ability.input_schema or {}).get("type")
    needs_object = schema_type == "object" and "default" not in (ability.input_schema or {})
    if ability.run_method in ("GET", "DELETE"):
        if data:
            return query_pairs(data), None
        # An object-typed schema rejects a missing input; an empty object can only travel as JSON text.
        return ([("input", json.dumps(data or {}))] if needs_object else None), None
    if data is None and not needs_object:
        return None, {}
    return None, {"input": data or {}}


def site_selection(site_ids: SiteSelector) -> dict[str, Any]:
    """`site_ids_or_domains` for a multi-site ability. None means every site; an empty list is refused,
    because the dashboard reads `[]` as "all sites" and a caller who filtered everything out does not
    mean that."""
    if site_ids is None:
        return {}
    selected = [s for s in site_ids if s not in (None, "")]
    if not selected:
        raise InvalidInput("empty site selection (pass None to mean every site)", code="client_validation")
    return {"site_ids_or_domains": [int(s) if isinstance(s, str) and s.isdigit() else s for s in selected]}


def _warn_site_errors(ability: str, errors: Sequence[UpdateError]) -> None:
    """Sites a listing could not read: the rest of the list is still good, so they are logged, not raised."""
    for error in errors:
        log.warning("%s: site %s (%s) not listed: %s [%s]", ability, error.site_id, error.site_url or "?",
                    error.message, error.code)


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def type_selection(types: Sequence[UpdateType | str] | None, *, allow_translations: bool = True) -> dict[str, Any]:
    if not types:
        return {}
    plural = [_PLURAL[update_type_of(t)] for t in types]
    if not allow_translations and "translations" in plural:
        raise InvalidInput("translations cannot be ignored or listed as ignored", code="client_validation")
    return {"types": sorted(set(plural), key=plural.index)}


def ability_page(body: Any, headers_total: str | None) -> Page[Ability]:
    total = int(headers_total) if headers_total and headers_total.isdigit() else None
    return Page([Ability.from_body(row) for row in body], total)


class AbilityMethods(Connection):
    """Methods that go through the Abilities API (application password, or the bearer where accepted)."""

    _catalog: dict[str, Ability] | None = None
    _catalog_lock: asyncio.Lock | None = None

    async def _full_name(self, name: str) -> str:
        name = name.strip().strip("/")
        if not name:
            raise InvalidInput("an ability name is required", code="client_validation")
        return name if "/" in name else f"{await self.namespace()}/{name}"

    # catalog

    async def list_abilities(self, category: str | None = None) -> list[Ability]:
        """Every registered ability (all pages, `X-WP-Total`)."""

        async def page(number: int, size: int) -> Page[Ability]:
            params = {"page": number, "per_page": size, **({"category": category} if category else {})}
            answer = await self._abilities_get("/abilities", params)
            return parse(answer, lambda body: ability_page(body, answer.headers.get("X-WP-Total")))

        return await collect_pages(page, per_page=ABILITY_PAGE_SIZE, what="abilities")

    async def list_ability_categories(self) -> list[AbilityCategory]:
        answer = await self._abilities_get("/categories")
        return parse(answer, lambda body: [AbilityCategory.model_validate(row) for row in body])

    async def get_ability(self, name: str) -> Ability:
        """One ability with its schemas and annotations (cached after the first full listing)."""
        full = await self._full_name(name)
        catalog = await self._abilities()
        if full in catalog:
            return catalog[full]
        answer = await self._abilities_get(f"/abilities/{full}")
        return parse(answer, Ability.from_body)

    async def _abilities(self) -> dict[str, Ability]:
        if self._catalog is None:
            if self._catalog_lock is None:
                self._catalog_lock = asyncio.Lock()
            async with self._catalog_lock:
                if self._catalog is None:
                    self._catalog = {a.name: a for a in await self.list_abilities()}
        return self._catalog

    # running

    async def run_ability(self, name: str, data: dict[str, Any] | None = None) -> Any:
        """Run any ability by name (`list-sites-v1` or `mainwp/list-sites-v1`) and return its raw output.

        The method and the encoding come from the ability's annotations; only readonly or idempotent
        abilities are retried, any other write whose answer is lost raises `OutcomeUnknown`.
        """
        if data is not None and not isinstance(data, dict):
            raise InvalidInput("ability input must be an object", code="client_validation")
        return (await self._run(name, data)).body

    async def _run(self, name: str, data: dict[str, Any] | None) -> Any:
        ability = await self.get_ability(name)
        params, body = encode_input(ability, data)
        return await self._transport.request(
            ability.run_method,
            f"{self.settings.resolved_abilities_url}/abilities/{ability.name}/run",
            credentials=self._ability_credentials(),
            idempotent=ability.safe_to_retry,
            params=params,
            json=body if ability.run_method == "POST" else None,
        )

    async def _run_parsed(self, name: str, data: dict[str, Any] | None, build: Any) -> Any:
        return parse(await self._run(name, data), build)

    async def _run_batch(self, name: str, data: dict[str, Any], result_model: type[Any]) -> BatchStart[Any]:
        """A batch-capable ability's answer, with how long the dashboard took (what sizes the next call)."""
        answer = await self._run(name, data)
        start = parse(answer, lambda body: BatchStart.parse(body, result_model))
        start.elapsed = answer.elapsed
        return start

    # sites

    async def sync_sites(self, site_ids: SiteSelector) -> BatchStart[SyncResult]:
        """Sync many sites: the immediate result, or a queued job above the dashboard's threshold."""
        return await self._run_batch("sync-sites-v1", site_selection(site_ids), SyncResult)

    async def check_sites(self, site_ids: SiteSelector) -> BatchStart[CheckResult]:
        return await self._run_batch("check-sites-v1", site_selection(site_ids), CheckResult)

    async def activate_plugins(self, site: int | str, slugs: Sequence[str]) -> PluginSwitch:
        """Activate installed plugins of one site (the child does it: a site whose child is dead fails each)."""
        return await self._switch_plugins("activate", site, slugs)

    async def deactivate_plugins(self, site: int | str, slugs: Sequence[str]) -> PluginSwitch:
        """Deactivate installed plugins of one site; WordPress then stops loading their code."""
        return await self._switch_plugins("deactivate", site, slugs)

    async def _switch_plugins(self, verb: str, site: int | str, slugs: Sequence[str]) -> PluginSwitch:
        names = [str(slug) for slug in slugs if slug]
        if not names:
            raise InvalidInput(f"no plugin slugs to {verb} on site {site}", code="client_validation")
        data = {"site_id_or_domain": site, "plugins": names}
        return await self._run_parsed(f"{verb}-site-plugins-v1", data, PluginSwitch.model_validate)

    # updates

    async def list_updates(
        self,
        type: UpdateType | str | None = None,  # noqa: A002 - the dashboard's own parameter name
        search: str | None = None,
        include: SiteSelector = None,
        exclude: Sequence[int | str] | None = None,
    ) -> list[PendingUpdate]:
        """Every pending update (ignored ones left out, as the dashboard does), all pages.

        Read through `list-updates-v1` because REST `/updates` stops at 50 items and its `exclude` drops
        list positions, not sites. `include`/`exclude` are site ids or domains; `search` matches slug or
        name, case-insensitively. `include` is sent in groups of 100 sites (the input rides in the query
        string); on a large fleet, listing by groups of sites is also several times faster than the whole
        list, which the dashboard rebuilds for every page.
        """
        types = type_selection([type] if type else None)
        selections = [{}] if include is None else [
            site_selection(chunk) for chunk in _chunks(site_selection(include)["site_ids_or_domains"], QUERY_SITES)
        ]
        ability = await self.get_ability("list-updates-v1")
        per_page = ability.max_per_page or 50
        limit = asyncio.Semaphore(4)

        async def listing(selection: dict[str, Any]) -> list[PendingUpdate]:
            async def page(number: int, size: int) -> Page[PendingUpdate]:
                data = {**selection, **types, "page": number, "per_page": size}
                found = await self._run_parsed("list-updates-v1", data, UpdateListPage.model_validate)
                if number == 1:
                    _warn_site_errors("list-updates-v1", found.errors)
                return Page(found.updates, found.total)

            async with limit:
                return await collect_pages(page, per_page=per_page, what="updates")

        updates = [u for found in await asyncio.gather(*(listing(s) for s in selections)) for u in found]
        if not exclude and not search:
            return updates
        excluded = {str(s) for s in exclude or []}
        needle = (search or "").lower()
        return [
            u for u in updates
            if str(u.site_id) not in excluded and u.site_url.rstrip("/").split("//")[-1] not in excluded
            and (not needle or needle in u.slug.lower() or needle in u.name.lower())
        ]

    async def site_updates(self, id_or_domain: int | str) -> list[PendingUpdate]:
        """Pending updates of one site (`get-site-updates-v1`)."""
        result = await self._run_parsed("get-site-updates-v1", {"site_id_or_domain": id_or_domain},
                                        SiteUpdates.model_validate)
        return result.updates

    async def list_ignored_updates(self, site: int | str | None = None) -> list[IgnoredUpdate]:
        """Global and per-site ignored updates, repeated per site (REST `/updates/ignored` is broken on
        6.1.2, so this reads `list-ignored-updates-v1`)."""
        data = site_selection(None if site is None else [site])
        found = await self._run_parsed("list-ignored-updates-v1", data, IgnoredList.model_validate)
        _warn_site_errors("list-ignored-updates-v1", found.errors)
        return found.ignored

    async def run_updates(
        self,
        site_ids: SiteSelector,
        types: Sequence[UpdateType | str] | None = None,
        specific_items: Sequence[str] | None = None,
    ) -> BatchStart[UpdateRunResult]:
        """`run-updates-v1`. Beware: `specific_items` is one slug filter for every site in the call, and a
        queued job does not apply the ignore lists; group sites whose planned items are the same."""
        data = {**site_selection(site_ids), **type_selection(types)}
        if specific_items:
            data["specific_items"] = [str(s) for s in specific_items]
        return await self._run_batch("run-updates-v1", data, UpdateRunResult)

    async def update_all(
        self, site_ids: SiteSelector = None, types: Sequence[UpdateType | str] | None = None
    ) -> BatchStart[UpdateRunResult]:
        """`update-all-v1`: every non-ignored update of the selected sites (None = every site)."""
        data = {**site_selection(site_ids), **type_selection(types)}
        return await self._run_parsed("update-all-v1", data, lambda b: BatchStart.parse(b, UpdateRunResult))

    async def ignore_updates(
        self, site: int | str, update_type: UpdateType | str, slugs: Sequence[str] = ()
    ) -> IgnoreResult:
        """Add items to one site's ignore list (core ignores the core update; slugs are not needed)."""
        return await self._ignore(site, update_type, slugs, "add")

    async def unignore_updates(
        self, site: int | str, update_type: UpdateType | str, slugs: Sequence[str] = ()
    ) -> IgnoreResult:
        return await self._ignore(site, update_type, slugs, "remove")

    async def _ignore(self, site: int | str, update_type: UpdateType | str, slugs: Sequence[str],
                      action: str) -> IgnoreResult:
        kind = update_type_of(update_type)
        data: dict[str, Any] = {"site_id_or_domain": site, "action": action}
        if kind is UpdateType.translation:
            raise InvalidInput("translations cannot be ignored", code="client_validation")
        if kind is not UpdateType.core:
            names = [s for s in slugs if s]
            if not names:
                raise InvalidInput(f"no {kind.value} slugs to {action} for site {site}", code="client_validation")
            data["slugs"] = names
        return await self._run_parsed(f"ignore-site-{_PLURAL[kind]}-v1", data, IgnoreResult.model_validate)

    # jobs

    async def job_status(self, job_id: str) -> JobStatus:
        """One read of `get-batch-job-status-v1`; `JobNotFound` once the job is unknown or expired."""
        if not job_id or not isinstance(job_id, str):
            raise InvalidInput("a job id is required", code="client_validation")
        return await self._run_parsed("get-batch-job-status-v1", {"job_id": job_id}, JobStatus.model_validate)
