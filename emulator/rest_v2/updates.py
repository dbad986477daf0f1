"""`/updates`: the pending list, per-site detail, running updates (dashboard-wide, per site, per type) and
ignoring. Per-item outcomes come from `SiteOperations`; this module only writes the dashboard's shapes."""

from __future__ import annotations

from contextlib import suppress
from typing import Any
from urllib.parse import quote

from emulator.jobs import child_outdated
from emulator.operations import ItemResult, SiteUnavailable
from emulator.records import SINGULAR, ItemType, Site
from emulator.rest import EDITABLE, READ, RestError, RestRequest, RestRoutes, invalid_param
from emulator.rest_v2.common import SITE_ID_OR_DOMAIN, queue_if_large, site_or_404
from emulator.rest_v2.shapes import site_simple, wp_time
from emulator.rollbacks import pending_rollbacks

routes = RestRoutes()
ID = r"(?P<id_domain>[A-Za-z0-9\-\.:%_]+)"
TYPES = ("all", "wp", "plugins", "themes", "translations")


def _types(req: RestRequest) -> tuple[ItemType, ...] | None:
    value = req.get("type", "all")
    if value not in TYPES:
        raise invalid_param("type", f"type is not one of {', '.join(TYPES)}.", "rest_not_in_enum")
    return None if value == "all" else (SINGULAR[value],)  # type: ignore[return-value]


def _listed(update: Any) -> dict[str, Any]:
    return {
        "site_id": update.site_id,
        "site_url": update.site_url,
        "site_name": update.site_name,
        "type": update.type,
        "slug": update.slug,
        "name": update.name,
        "current_version": update.current_version,
        "new_version": update.new_version,
    }


@routes.add(READ, "/updates")
async def list_updates(req: RestRequest) -> dict[str, Any]:
    include, exclude = req.id_list("include"), req.id_list("exclude")
    site_ids = include
    if exclude:
        excluded = set(exclude)
        site_ids = [i for i in (include or list(req.state.sites)) if i not in excluded]
    types, search = _types(req), req.optional_text("search")

    def build() -> list[dict[str, Any]]:
        return [_listed(u) for u in req.state.all_pending_updates(types, site_ids=site_ids, search=search)]

    return {"success": 1, "data": req.state.listing(("rest:/updates", types, tuple(site_ids or ()), search), build)}


def site_update_detail(
    req: RestRequest, site: Site, types: tuple[ItemType, ...] | None, search: str | None
) -> dict[str, Any]:
    """`{wp, plugins, themes, translations}` as the dashboard stores them, ignored items left out, and
    `rollback_plugins`/`rollback_themes` when it remembers a rollback of a version still offered."""
    listed = req.state.pending_updates(site, types)
    if search:
        listed = [u for u in listed if search.lower() in (u.slug + u.name).lower()]
    detail: dict[str, Any] = {"wp": [], "plugins": {}, "themes": {}, "translations": []}
    for u in listed:
        if u.type == "wp":
            detail["wp"] = {"current": u.current_version, "new": u.new_version}
        elif u.type == "plugin":
            item = site.plugins[u.slug]
            detail["plugins"][u.slug] = {
                "Name": u.name,
                "PluginURI": "",
                "Version": u.current_version,
                "Description": "",
                "Author": "",
                "AuthorURI": "",
                "TextDomain": u.slug.split("/")[0],
                "DomainPath": "",
                "Network": False,
                "RequiresWP": "",
                "RequiresPHP": "",
                "UpdateURI": "",
                "RequiresPlugins": "",
                "Title": u.name,
                "AuthorName": "",
                "update": {
                    "id": f"w.org/plugins/{u.slug.split('/')[0]}",
                    "slug": u.slug.split("/")[0],
                    "plugin": u.slug,
                    "new_version": u.new_version,
                    "url": "",
                    "package": "",
                    "icons": [],
                    "banners": [],
                    "banners_rtl": [],
                    "requires": "",
                    "tested": "",
                    "requires_php": "",
                },
                "active": int(item.active),
                "wp_compatible": True,
                "php_compatible": True,
            }
        elif u.type == "theme":
            detail["themes"][u.slug] = {
                "update": {
                    "theme": u.slug,
                    "new_version": u.new_version,
                    "url": "",
                    "package": "",
                    "requires": "",
                    "requires_php": "",
                },
                "Name": u.name,
                "Version": u.current_version,
                "active": int(site.themes[u.slug].active),
            }
        else:
            detail["translations"].append(
                {"type": "plugin", "slug": u.slug, "language": "de_DE", "version": u.current_version, "name": u.name}
            )
    for key in ("plugins", "themes"):
        detail[key] = detail[key] or []
    for key, remembered in pending_rollbacks(site).items():
        if search:
            remembered = {k: v for k, v in remembered.items() if search.lower() in str(v["name"]).lower()}
        if remembered and (types is None or key[:-1] in types):
            detail[f"rollback_{key}"] = remembered
    return detail


@routes.add(READ, rf"/updates/{SITE_ID_OR_DOMAIN}")
async def site_updates(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    return {"success": 1, "data": site_update_detail(req, site, _types(req), req.optional_text("search"))}


def _ignored_route_bug(req: RestRequest) -> RestError:
    """The real dashboard (6.1.2 on WordPress >= 6.9) answers these routes with this error, always."""
    return RestError(
        "ability_invalid_input",
        f'Ability "{req.ns}/list-ignored-updates-v1" has invalid input. '
        "Reason: scope is not a valid property of Object.",
        500,
    )


@routes.add(READ, "/updates/ignored")
async def ignored_global(req: RestRequest) -> dict[str, Any]:
    raise _ignored_route_bug(req)


@routes.add(READ, rf"/updates/{ID}/ignored")
async def ignored_site(req: RestRequest) -> dict[str, Any]:
    site_or_404(req)
    raise _ignored_route_bug(req)


def _stamp(req: RestRequest) -> str:
    stamp = wp_time(req.state.now())
    req.state.set_option("last_time_start_batch_updates", stamp)
    return stamp


@routes.add(EDITABLE, "/updates/update")
async def update_everything(req: RestRequest) -> dict[str, Any]:
    sites = [s for s in req.state.sites.values() if req.state.pending_updates(s)]
    stamp = _stamp(req)
    job_id = queue_if_large(req, "update", list(req.state.sites))
    if job_id is not None:
        return {
            "success": 1,
            "message": "Batch updates queued.",
            "job_id": job_id,
            "queued_count": 0,
            "last_time_start_batch_updates": stamp,
        }
    updated = sites_updated = 0
    errors = sum(1 for s in sites if child_outdated(s))  # `run-updates-v1`'s gate: one error per site refused
    for run in await req.ops.update_sites([s for s in sites if not child_outdated(s)]):
        moved = sum(1 for r in run.results if r.reported_success)
        updated += moved
        errors += sum(1 for r in run.results if not r.reported_success) + (1 if run.error else 0)
        sites_updated += 1 if moved else 0
    return {
        "success": 1,
        "message": "Batch updates completed.",
        "summary": {"total_updated": updated, "total_errors": errors, "sites_updated": sites_updated},
        "last_time_start_batch_updates": stamp,
    }


def _site_for_update(req: RestRequest) -> Site:
    site = site_or_404(req)
    if site.suspended:
        raise RestError(req.code("rest_updates_site_error"), "The site is suspended.", 400)
    return site


@routes.add(EDITABLE, rf"/updates/{ID}/update")
async def update_site(req: RestRequest) -> dict[str, Any]:
    site = _site_for_update(req)
    stamp = _stamp(req)
    # run through `run-updates-v1` (its child-version gate included), whose per-site errors this route never reads
    if not child_outdated(site):
        with suppress(SiteUnavailable):
            await req.ops.update_site(site)
    return {
        "success": 1,
        "message": "Batch updates for the site completed.",
        "summary": [],
        "last_time_start_batch_updates": stamp,
        "site": site_simple(site),
    }


@routes.add(EDITABLE, rf"/updates/{ID}/(?:update/)?wp")
async def update_core(req: RestRequest) -> dict[str, Any]:
    site = _site_for_update(req)
    try:
        results = await req.ops.update_items(site, "wp")
    except SiteUnavailable as error:  # caught, and said as `MainWP_Error_Helper::get_console_error_message`
        return {"success": 0, "error": error.console_message} if error.thrown else {"success": 0}
    if not results:
        return {"success": 0, "error": "No update found for the set locale."}
    result = results[0]
    if result.outcome == "failed":
        return {"success": 0, "error": result.error}
    return {
        "success": 1,
        "message": "WordPress was updated to the latest version.",
        "data": {"old_version": result.old_version, "version": result.new_version},
    }


def item_answer(result: ItemResult) -> dict[str, dict[str, Any]]:
    """The per-slug answer, including the dashboard's odd failure shapes (plugins twice, themes nameless)."""
    if result.outcome == "failed":
        if result.type == "plugin":
            return {
                quote(result.slug, safe=""): {"success": 0, "error": result.error},
                result.slug: {
                    "success": 0,
                    "name": result.name,
                    "old_version": result.old_version,
                    "version": result.old_version,
                },
            }
        return {result.slug: {"success": 0, "name": "", "old_version": "", "version": result.old_version}}
    old = "" if result.type == "translation" else result.old_version
    version = result.new_version or result.old_version if result.type != "translation" else result.old_version
    return {result.slug: {"success": 1, "name": result.name, "old_version": old, "version": version}}


@routes.add(EDITABLE, rf"/updates/{ID}/(?:update/)?(?P<kind>plugins|themes|translations)")
async def update_items(req: RestRequest) -> dict[str, Any]:
    site = _site_for_update(req)
    kind = req.path_params["kind"]
    item_type: ItemType = SINGULAR[kind]  # type: ignore[assignment]
    slugs = req.str_list("slug")
    nothing = {"success": 0, "message": f"No {kind.title()} to update."}
    if not slugs:
        return nothing
    try:
        results = await req.ops.update_items(site, item_type, slugs, refresh_stored=item_type != "plugin")
    except SiteUnavailable as error:  # the exception's message alone, in an error without a status
        raise RestError(req.code(f"rest_upgrade_{kind}_of_site_error"), error.thrown or error.message, None) from None
    if not results:
        return nothing
    data: dict[str, Any] = {}
    for result in sorted(results, key=lambda r: r.slug):
        data.update(item_answer(result))
    return {"success": 1, "data": dict(sorted(data.items()))}


@routes.add(EDITABLE, rf"/updates/{ID}/ignore/wp")
async def ignore_core(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    site.ignore_core_updates = True
    req.state.save_site(site)
    return {"success": 1, "message": "Ignore core update successfully."}


@routes.add(EDITABLE, rf"/updates/{ID}/ignore/(?P<kind>plugins|themes)")
async def ignore_items(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    kind = req.path_params["kind"]
    item_type: ItemType = SINGULAR[kind]  # type: ignore[assignment]
    value = req.get("slug")
    if value in (None, "", [], {}):
        if item_type == "plugin":
            site.ignore_plugin_updates = True
        else:
            site.ignore_theme_updates = True
        req.state.save_site(site)
        return {"success": 1, "message": f"Ignore all {kind} updates successfully.", "url": site.url}
    if isinstance(value, dict):  # slug[file]=Name, the form the dashboard expects
        slugs = [str(k) for k in value]
    else:  # a plain list is stored under its indexes ("0", "1"...): the dashboard's own bug
        slugs = [str(i) for i, _ in enumerate(req.str_list("slug") or [])]
    req.state.ignore_items(site, item_type, slugs)
    data: Any = {slug: "success" for slug in slugs} if isinstance(value, dict) else ["success" for _ in slugs]
    return {"success": 1, "data": data, "url": site.url}
