"""The `{ns}-updates` abilities (13): listing pending and ignored updates, running them on one site or many
(queued above the batch threshold), and the per-site ignore lists.

The real dashboard's quirks are kept: a failed theme update is reported in neither `updated` nor `errors`,
and the abilities write only per-site ignore entries."""

from __future__ import annotations

from typing import Any

from emulator.abilities.context import AbilityContext, page_of
from emulator.abilities.errors import AbilityError
from emulator.abilities.shapes import (
    ALL_TYPES,
    TYPE_IN,
    TYPE_OUT,
    done_view,
    resolution_error,
    update_error,
    update_view,
)
from emulator.operations import SiteSuspended, SiteUnavailable
from emulator.records import ItemType, Site
from emulator.rollbacks import pending_rollbacks

SITE_SCOPED = frozenset({
    "set-ignored-updates-v1", "get-site-updates-v1", "update-site-core-v1", "update-site-plugins-v1",
    "update-site-themes-v1", "update-site-translations-v1", "ignore-site-core-v1", "ignore-site-plugins-v1",
    "ignore-site-themes-v1",
})
SINGULAR_IN = {"core": "wp", "plugin": "plugin", "theme": "theme"}


def _summary(updates: list[dict[str, Any]]) -> dict[str, int]:
    counts = {"core": 0, "plugins": 0, "themes": 0, "translations": 0}
    for update in updates:
        counts[update["type"] if update["type"] == "core" else update["type"] + "s"] += 1
    return counts | {"total": len(updates)}


async def list_updates(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    sites, failures = ctx.resolve_sites(args.get("site_ids_or_domains"))
    types = tuple(TYPE_IN[t] for t in (args.get("types") or ALL_TYPES))

    def build() -> tuple[list[dict[str, Any]], dict[str, int]]:
        views = [update_view(u) for s in sites for u in ctx.state.pending_updates(s, types)]  # type: ignore[arg-type]
        return views, _summary(views)

    # a client pages through the whole fleet: build its list once, not once per page
    selection = tuple(s.id for s in sites) if args.get("site_ids_or_domains") else "all"
    updates, summary = ctx.state.listing(("list-updates-v1", selection, types), build)
    page, per_page = args["page"], args["per_page"]
    return {"updates": page_of(updates, page, per_page), "summary": dict(summary), "page": page,
            "per_page": per_page, "total": len(updates), "errors": [resolution_error(f) for f in failures]}


async def get_site_updates(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    types = tuple(TYPE_IN[t] for t in (args.get("types") or ALL_TYPES))
    updates = [update_view(u) for u in ctx.state.pending_updates(site, types)]  # type: ignore[arg-type]
    return {"site_id": site.id, "site_url": site.url, "site_name": site.name, "updates": updates,
            "rollback_items": {"plugins": [], "themes": [], **pending_rollbacks(site)}, "summary": _summary(updates)}


async def _update_one_site(ctx: AbilityContext, site: Site, types: list[str], slugs: list[str] | None
                           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the requested types on one site: (updated, errors), as the abilities report them."""
    updated: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for type_name in ALL_TYPES:
        if type_name not in types:
            continue
        item_type: ItemType = TYPE_IN[type_name]  # type: ignore[assignment]
        wanted = slugs if item_type in ("plugin", "theme") else None
        try:
            results = await ctx.ops.update_items(site, item_type, wanted)
        except SiteUnavailable as exc:  # `execute_*_updates` catch fetch_url's exception: one error per item
            code, message = ("update_exception", exc.thrown) if exc.thrown else ("update_failed", exc.message)
            for slug in ctx.ops.update_candidates(site, item_type, wanted):
                errors.append(update_error(site, TYPE_OUT[item_type], slug, ctx.code(code), message))
            continue
        except SiteSuspended:
            errors.append(update_error(site, "site", "", ctx.code("site_suspended"), "Site is suspended."))
            break
        for result in results:
            if result.outcome != "failed":
                updated.append(done_view(site, result))
            elif item_type != "theme":  # theme failures are silent in the real abilities
                errors.append(update_error(site, TYPE_OUT[item_type], result.slug, ctx.code("update_failed"),
                                           result.error))
    return updated, errors


def _gate(ctx: AbilityContext, site: Site) -> AbilityError | None:
    if site.offline_check_result == -1:
        return ctx.fail("site_offline", "Site is known to be offline.", 400)
    return ctx.outdated_child(site)


def _updatable_site(ctx: AbilityContext, args: dict[str, Any]) -> Site:
    """The one site a single-site update ability names, refused when known offline or its child is too old."""
    site = ctx.resolve_site(args["site_id_or_domain"])
    refused = _gate(ctx, site)
    if refused is not None:
        raise refused
    return site


async def _run_many(ctx: AbilityContext, args: dict[str, Any], slugs: list[str] | None) -> dict[str, Any]:
    sites, failures = ctx.resolve_sites(args.get("site_ids_or_domains"))
    types = list(args.get("types") or ALL_TYPES)
    errors = [resolution_error(f) for f in failures]
    if ctx.jobs.should_queue(len(sites)):
        job = ctx.jobs.enqueue("update", [s.id for s in sites], types=types, specific_items=slugs)
        return {"queued": True, "job_id": job["job_id"], "status_url": ctx.status_url(job["job_id"]),
                "updates_queued": len(sites), "errors": errors}

    async def one(site: Site) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        refused = _gate(ctx, site)
        if refused is not None:
            return [], [update_error(site, "site", "", refused.code, refused.message)]
        return await _update_one_site(ctx, site, types, slugs)

    updated: list[dict[str, Any]] = []
    for site in sites:  # one after another, as the dashboard's foreach
        site_updated, site_errors = await one(site)
        updated += site_updated
        errors += site_errors
    return {"updated": updated, "errors": errors,
            "summary": {"total_updated": len(updated), "total_errors": len(errors),
                        "sites_updated": len({u["site_id"] for u in updated})}}


async def run_updates(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _run_many(ctx, args, list(args.get("specific_items") or []) or None)


async def update_all(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _run_many(ctx, args, None)


async def _update_site_type(ctx: AbilityContext, args: dict[str, Any], type_name: str) -> dict[str, Any]:
    site = _updatable_site(ctx, args)
    if site.suspended:
        raise ctx.fail("site_suspended", "Site is suspended.", 400)
    updated, errors = await _update_one_site(ctx, site, [type_name], list(args.get("slugs") or []) or None)
    return {"updated": updated, "errors": errors,
            "summary": {"total_updated": len(updated), "total_errors": len(errors)}}


async def update_site_plugins(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _update_site_type(ctx, args, "plugins")


async def update_site_themes(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _update_site_type(ctx, args, "themes")


async def update_site_translations(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _update_site_type(ctx, args, "translations")


async def update_site_core(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = _updatable_site(ctx, args)
    try:
        results = await ctx.ops.update_items(site, "wp")
    except SiteUnavailable as exc:  # `execute_core_update` catches fetch_url's exception
        if exc.thrown:
            raise ctx.fail("update_exception", exc.thrown, None) from None
        raise ctx.fail("update_failed", exc.message, None) from None
    except SiteSuspended:
        raise ctx.fail("site_suspended", "Site is suspended.", 400) from None
    if not results:
        raise ctx.fail("no_updates", "No WordPress core update available for this site.", 404)
    result = results[0]
    if result.outcome == "failed":
        raise ctx.fail("update_failed", result.error or "Core update failed.", None)
    return {"updated": done_view(site, result)}


# ---- ignore lists -------------------------------------------------------------------------------------------


async def list_ignored_updates(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    """Global and per-site entries, repeated for every selected site; for core the site's own entry wins."""
    sites, failures = ctx.resolve_sites(args.get("site_ids_or_domains"))
    wanted = {SINGULAR_IN[t.rstrip("s")] if t != "core" else "wp" for t in (args.get("types") or [])}
    ignored: list[dict[str, Any]] = []
    for site in sites:
        entries = ctx.state.ignored_entries(site)
        site_has_core = any(e.type == "wp" and e.site_id is not None for e in entries)
        for entry in entries:
            if wanted and entry.type not in wanted:
                continue
            if entry.type == "wp" and entry.site_id is None and site_has_core:
                continue
            versions = list(entry.ignored_versions)
            ignored.append({"site_id": site.id, "site_url": site.url, "site_name": site.name,
                            "type": TYPE_OUT[entry.type], "slug": entry.slug, "name": entry.name,
                            "ignored_version": "all_versions" if "all_versions" in versions else ",".join(versions)})
    return {"ignored": ignored, "total": len(ignored), "errors": [resolution_error(f) for f in failures]}


async def set_ignored_updates(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    item_type: ItemType = SINGULAR_IN[args["type"]]  # type: ignore[assignment]
    slug = "wordpress" if item_type == "wp" else args["slug"]
    if args["action"] == "ignore":
        ctx.state.ignore_items(site, item_type, [slug])
    else:
        ctx.state.unignore_items(site, item_type, [slug])
    return {"success": True, "action": args["action"], "site_id": site.id, "type": args["type"],
            "slug": args["slug"]}


async def ignore_site_core(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    if args.get("action", "add") == "add":
        ctx.state.ignore_items(site, "wp", ["wordpress"])
        return {"success": True, "message": "Core updates ignored for this site.", "ignored_count": 1}
    ctx.state.unignore_items(site, "wp", ["wordpress"])
    return {"success": True, "message": "Core updates unignored for this site.", "ignored_count": 1}


async def _ignore_items(ctx: AbilityContext, args: dict[str, Any], item_type: ItemType, noun: str
                        ) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    slugs = [s for s in args["slugs"] if s]
    if args.get("action", "add") == "add":
        ctx.state.ignore_items(site, item_type, slugs)
        verb = "ignored"
    else:
        current = site.ignored_plugins if item_type == "plugin" else site.ignored_themes
        slugs = [s for s in slugs if s in current]
        ctx.state.unignore_items(site, item_type, slugs)
        verb = "unignored"
    count = len(slugs)
    message = f"{count} {noun}{'s' if count != 1 else ''} {verb}." if count else f"No {noun}s were {verb}."
    return {"success": count > 0, "message": message, "ignored_count": count}


async def ignore_site_plugins(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _ignore_items(ctx, args, "plugin", "plugin")


async def ignore_site_themes(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _ignore_items(ctx, args, "theme", "theme")


HANDLERS = {
    "list-updates-v1": list_updates, "run-updates-v1": run_updates, "list-ignored-updates-v1": list_ignored_updates,
    "set-ignored-updates-v1": set_ignored_updates, "get-site-updates-v1": get_site_updates,
    "update-site-core-v1": update_site_core, "update-site-plugins-v1": update_site_plugins,
    "update-site-themes-v1": update_site_themes, "update-site-translations-v1": update_site_translations,
    "ignore-site-core-v1": ignore_site_core, "ignore-site-plugins-v1": ignore_site_plugins,
    "ignore-site-themes-v1": ignore_site_themes, "update-all-v1": update_all,
}
