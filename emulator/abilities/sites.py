"""The `{ns}-sites` abilities (30): listing, one site, sync/check/reconnect/disconnect/suspend one or many
(queued above the batch threshold), plugins and themes, security, changes, client and costs."""

from __future__ import annotations

from typing import Any

from emulator.abilities.context import AbilityContext, page_of
from emulator.abilities.errors import AbilityError
from emulator.abilities.shapes import (
    client_view,
    cost_view,
    item_view,
    site_basic,
    site_full,
    site_ref,
)
from emulator.jobs import CHILD_OUTDATED, child_outdated
from emulator.operations import SiteUnavailable
from emulator.records import Item, Site

SITE_SCOPED = frozenset({
    "get-site-v1", "get-site-plugins-v1", "get-site-themes-v1", "get-abandoned-plugins-v1",
    "get-abandoned-themes-v1", "get-site-security-v1", "get-site-changes-v1", "get-site-client-v1",
    "get-site-costs-v1",
})
DELETE_SITE_WARNINGS = [
    "This action is irreversible. The site record will be permanently deleted from the MainWP Dashboard.",
    "All sync data, site options, and historical information stored in the dashboard database will be removed.",
    "Group/tag associations for this site will be deleted.",
    "The MainWP Child plugin on the remote site will NOT be removed - only the dashboard connection will be "
    "deleted.",
]
SECURITY_CHECKS = ("listing", "wp_version", "rsd", "wlw", "db_reporting", "php_reporting", "versions",
                   "registrations", "admin", "readme", "sec_outdated_plugins", "sec_inactive_plugins",
                   "sec_outdated_themes", "sec_inactive_themes")


def _filtered(ctx: AbilityContext, args: dict[str, Any], *, tag_key: str) -> list[Site]:
    """The dashboard's site query (status by `sync_errors` and `suspended`, as its database layer reads them)."""
    status = args.get("status") or "any"
    tag_ids = args.get(tag_key)
    if isinstance(tag_ids, int):
        tag_ids = [tag_ids]
    sites = ctx.state.list_sites(status=status, search=args.get("search") or None, client_id=args.get("client_id"))
    if tag_ids:
        wanted = set(tag_ids)
        sites = [s for s in sites if wanted & set(s.tag_ids)]
    return sorted(sites, key=lambda s: s.url)


async def list_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    sites = _filtered(ctx, args, tag_key="tag_id")
    # The real count ignores `available_update` and counts every site.
    total = len(ctx.state.sites) if args.get("status") == "available_update" else len(sites)
    page, per_page = args["page"], args["per_page"]
    return {"items": [site_basic(s) for s in page_of(sites, page, per_page)], "page": page, "per_page": per_page,
            "total": total}


async def count_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"total": len(_filtered(ctx, args, tag_key="tag_ids"))}


async def get_sites_basic(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    sites = _filtered(ctx, args, tag_key="tag_ids")
    page, per_page = args.get("page", 1), args.get("per_page", 20)
    return {"items": [site_ref(s) for s in page_of(sites, page, per_page)], "page": page, "per_page": per_page,
            "total": len(sites)}


async def get_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return site_full(ctx.state, ctx.resolve_site(args["site_id_or_domain"]), bool(args.get("include_stats")))


async def add_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    url = str(args["url"]).strip()
    if "://" not in url or not url.split("://", 1)[1].strip("/"):
        raise ctx.fail("invalid_url", "Invalid URL. Please enter a valid URL starting with http:// or https://.")
    url = url.rstrip("/") + "/"
    if ctx.state.find_site(url) is not None:
        raise ctx.fail("site_already_exists", "A site with this URL already exists.", 409)
    client_id = int(args.get("client_id") or 0)
    site = ctx.state.add_site(url, str(args["name"]), str(args["admin_username"]), client_id,
                              [t for t in args.get("tag_ids", []) if t in ctx.state.tags], now=ctx.emulator.clock.now())
    return site_full(ctx.state, site)


async def update_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    if "name" in args:
        site.name = str(args["name"])
    if "admin_username" in args:
        site.admin = str(args["admin_username"])
    if "client_id" in args:
        client_id = int(args["client_id"])
        if client_id:
            ctx.resolve_client(client_id)
        site.client_id = client_id
    if "suspended" in args:
        site.suspended = bool(args["suspended"])
    if "url" in args and str(args["url"]).strip():
        url = str(args["url"]).strip().rstrip("/") + "/"
        other = ctx.state.find_site(url)
        if other is not None and other.id != site.id:
            raise ctx.fail("site_already_exists", "A site with this URL already exists.", 409)
        ctx.state.change_site_url(site, url)
    ctx.state.save_site(site)
    if "tag_ids" in args:
        ctx.state.set_site_tags(site, list(args["tag_ids"]))
    return site_full(ctx.state, site)


async def delete_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    mode = ctx.destructive_mode(args)
    site = ctx.resolve_site(args["site_id_or_domain"])
    ctx.require_confirm(mode, "Deletion requires confirm parameter to be true.")
    if mode == "dry_run":
        return {"dry_run": True, "would_affect": site_ref(site), "warnings": list(DELETE_SITE_WARNINGS)}
    ctx.state.remove_site(site)
    return {"dry_run": False, "deleted": True, "site": site_ref(site), "would_affect": [], "warnings": []}


async def reconnect_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    if not await ctx.ops.reconnect(site):
        raise ctx.fail("reconnect_failed", "Failed to reconnect to the site.", 503)
    return {"reconnected": True, "site": site_full(ctx.state, site)}


async def disconnect_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    await ctx.ops.disconnect(site)
    return {"disconnected": True, "site": site_full(ctx.state, site)}


async def suspend_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    ctx.ops.suspend(site)
    return {"suspended": True, "site": site_full(ctx.state, site)}


async def unsuspend_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    ctx.ops.unsuspend(site)
    return {"unsuspended": True, "site": site_full(ctx.state, site)}


async def check_site(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    result = await ctx.ops.check(site)
    seconds = round(result.response_ms / 1000, 2)
    return {"site_id": site.id, "response_time": seconds, "checked": True, "site": site_ref(site),
            "status": {"online": result.online, "http_code": result.http_code, "response_time": seconds}}


async def _plugin_action(ctx: AbilityContext, args: dict[str, Any], activate: bool) -> dict[str, Any]:
    site = ctx.current_child_site(args["site_id_or_domain"])
    verb = "activation" if activate else "deactivation"
    slugs = list(args["plugins"])
    errors = [{"slug": slug, "code": ctx.code(f"{verb}_failed"), "message": "Plugin not found on the site."}
              for slug in slugs if slug not in site.plugins]
    try:
        done = [item_view(item) for item in await ctx.ops.set_plugins_active(site, slugs, activate)]
    except SiteUnavailable as error:
        if error.thrown is not None:  # the callback does not catch fetch_url's exception: WordPress wraps it
            raise callback_exception(ctx, error.thrown) from None
        done = []
        errors = [{"slug": slug, "code": ctx.code(f"{verb}_failed"), "message": error.message} for slug in slugs]
    return {"activated" if activate else "deactivated": done, "errors": errors}


def callback_exception(ctx: AbilityContext, thrown: str) -> AbilityError:
    """What WordPress answers when an ability's callback throws (`WP_Ability::invoke_callback`): a WP_Error
    without a status, so HTTP 500, the exception's message quoted."""
    return AbilityError("ability_callback_exception",
                        f'Ability "{ctx.ability.name}" callback threw an exception: {thrown}', None)


async def activate_site_plugins(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _plugin_action(ctx, args, True)


async def deactivate_site_plugins(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _plugin_action(ctx, args, False)


def _delete_items(ctx: AbilityContext, args: dict[str, Any], key: str) -> dict[str, Any]:
    mode = ctx.destructive_mode(args)
    site = ctx.current_child_site(args["site_id_or_domain"])
    ctx.require_confirm(mode)
    items: dict[str, Item] = site.plugins if key == "plugins" else site.themes
    found = [items[s] for s in args[key] if s in items]
    warning = "Plugin %s is currently active." if key == "plugins" else "Theme %s is the currently active theme."
    warnings = [warning % i.slug for i in found if i.active]
    if mode == "dry_run":
        return {"dry_run": True, "would_affect": [item_view(i) for i in found], "count": len(found),
                "warnings": warnings}
    errors = [{"slug": s, "code": ctx.code("deletion_failed"), "message": f"{s} is not installed on the site."}
              for s in args[key] if s not in items]
    for item in found:
        del items[item.slug]
    ctx.state.save_site(site)
    return {"dry_run": False, "deleted": [item_view(i) for i in found], "count": len(found), "errors": errors,
            "warnings": []}


async def delete_site_plugins(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return _delete_items(ctx, args, "plugins")


async def delete_site_themes(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return _delete_items(ctx, args, "themes")


async def activate_site_theme(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.current_child_site(args["site_id_or_domain"])
    theme = site.themes.get(args["theme"])
    if theme is None:
        raise ctx.fail("activation_failed", f"Theme {args['theme']} is not installed on the site.", 500)
    for other in site.themes.values():
        other.active = other.slug == theme.slug
    ctx.state.save_site(site)
    return {"activated": True, "theme": item_view(theme)}


def _list_items(ctx: AbilityContext, args: dict[str, Any], key: str) -> tuple[Site, list[dict[str, Any]]]:
    site = ctx.current_child_site(args["site_id_or_domain"])
    items = [item_view(i) for i in (site.plugins if key == "plugins" else site.themes).values()]
    status = args.get("status", "all")
    if status != "all":
        items = [i for i in items if i["active"] == (status == "active")]
    if "has_update" in args:
        items = [i for i in items if i["has_update"] == bool(args["has_update"])]
    return site, [{k: v for k, v in i.items() if k != "has_update"} for i in items]


async def get_site_plugins(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site, plugins = _list_items(ctx, args, "plugins")
    return {"site_id": site.id, "site_url": site.url, "plugins": plugins, "total": len(plugins)}


async def get_site_themes(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site, themes = _list_items(ctx, args, "themes")
    active = next((t.slug for t in site.themes.values() if t.active), "")
    return {"site_id": site.id, "site_url": site.url, "active_theme": active, "themes": themes,
            "total": len(themes)}


async def get_abandoned_plugins(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    """The dashboard reads the child's `plugins_outdate_info`; the generated fleet reports none abandoned."""
    ctx.resolve_site(args["site_id_or_domain"])
    return {"plugins": [], "total": 0}


async def get_abandoned_themes(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    ctx.resolve_site(args["site_id_or_domain"])
    return {"themes": [], "total": 0}


async def get_site_security(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    """The synced security stats: 'Y' passes, 'N' is an issue (derived from the stored copy of the site)."""
    site = ctx.resolve_site(args["site_id_or_domain"])
    pending = ctx.state.pending_updates(site, respect_ignores=False)
    issue = {
        "wp_version": any(u.type == "wp" for u in pending),
        "sec_outdated_plugins": any(u.type == "plugin" for u in pending),
        "sec_outdated_themes": any(u.type == "theme" for u in pending),
        "sec_inactive_plugins": any(not p.active for p in site.plugins.values()),
        "sec_inactive_themes": sum(1 for t in site.themes.values() if not t.active) > 1,
    }
    stats = {check: "N" if issue.get(check) else "Y" for check in SECURITY_CHECKS}
    return {"site_id": site.id, "security_issues": stats, "total_issues": sum(1 for v in stats.values() if v == "N")}


async def get_site_changes(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    """Changes made outside the dashboard, from the Logs module; the generated fleet records none."""
    ctx.resolve_site(args["site_id_or_domain"])
    return {"items": [], "page": args.get("page", 1), "per_page": args.get("per_page", 20), "total": 0}


async def get_site_client(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    if not site.client_id:
        return {"client": None, "message": "No client assigned to this site."}
    client = ctx.state.clients.get(site.client_id)
    if client is None:
        return {"client": None, "message": "Assigned client not found in database."}
    return {"client": client_view(client), "message": "Client found."}


async def get_site_costs(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    site = ctx.resolve_site(args["site_id_or_domain"])
    costs = [cost_view(c) for c in ctx.state.site_costs(site)]
    return {"site_id": site.id, "costs": costs, "total": len(costs)}


# ---- several sites (batch-capable) --------------------------------------------------------------------------


async def sync_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    identifiers = args.get("site_ids_or_domains") or args.get("site_ids") or []
    sites, failures = ctx.resolve_sites(identifiers)
    excluded = set(args.get("exclude_ids") or [])
    sites = [s for s in sites if s.id not in excluded]
    if ctx.jobs.should_queue(len(sites)):
        job = ctx.jobs.enqueue("sync", [s.id for s in sites])
        return {"queued": True, "job_id": job["job_id"], "status_url": ctx.status_url(job["job_id"]),
                "sites_queued": len(sites)}

    async def one(site: Site) -> dict[str, Any] | None:
        if site.offline_check_result == -1:
            return _site_error(ctx, site, "site_offline", "Site is known to be offline.", 503)
        if child_outdated(site):
            return _site_error(ctx, site, "child_outdated", CHILD_OUTDATED, 400)
        result = await ctx.ops.sync(site)  # MainWP_Sync::sync_site keeps why in the site's `sync_errors`
        return None if result.ok else _site_error(ctx, site, "sync_failed", "Sync operation failed.", 500)

    outcomes = [await one(s) for s in sites]  # one after another, as the dashboard's foreach
    synced = [site_ref(s) for s, error in zip(sites, outcomes, strict=True) if error is None]
    errors = failures + [e for e in outcomes if e is not None]
    return {"queued": False, "synced": synced, "errors": errors, "total_synced": len(synced),
            "total_errors": len(errors)}


def _site_error(ctx: AbilityContext, site: Site, suffix: str, message: str, status: int) -> dict[str, Any]:
    return {"identifier": site.url, "code": ctx.code(suffix), "message": message, "status": status}


async def _many(ctx: AbilityContext, args: dict[str, Any], job_type: str, key: str) -> dict[str, Any]:
    sites, failures = ctx.resolve_sites(args.get("site_ids_or_domains"))
    if not sites:
        raise ctx.fail("site_not_found", "No valid sites found.", 404)
    if ctx.jobs.should_queue(len(sites)):
        job = ctx.jobs.enqueue(job_type, [s.id for s in sites])
        return {"queued": True, "job_id": job["job_id"], "total": len(sites), "errors": failures}

    async def one(site: Site) -> dict[str, Any]:
        if job_type == "check":
            result = await ctx.ops.check(site)
            return site_ref(site) | {"status": {"online": result.online, "http_code": result.http_code}}
        if job_type == "reconnect":
            if not await ctx.ops.reconnect(site):
                return {"error": _site_error(ctx, site, "reconnect_failed", "Failed to reconnect to the site.", 503)}
            return site_ref(site)
        if job_type == "disconnect":
            await ctx.ops.disconnect(site)
            return site_ref(site)
        ctx.ops.suspend(site)
        return site_ref(site) | {"suspended": 1}

    outcomes = [await one(s) for s in sites]
    done = [o for o in outcomes if "error" not in o]
    errors = failures + [o["error"] for o in outcomes if "error" in o]
    return {"queued": False, key: done, "errors": errors, f"total_{key}": len(done), "total_errors": len(errors)}


async def reconnect_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _many(ctx, args, "reconnect", "reconnected")


async def disconnect_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _many(ctx, args, "disconnect", "disconnected")


async def check_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _many(ctx, args, "check", "checked")


async def suspend_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return await _many(ctx, args, "suspend", "suspended")


HANDLERS = {
    "list-sites-v1": list_sites, "get-site-v1": get_site, "sync-sites-v1": sync_sites,
    "get-site-plugins-v1": get_site_plugins, "get-site-themes-v1": get_site_themes, "add-site-v1": add_site,
    "update-site-v1": update_site, "delete-site-v1": delete_site, "reconnect-site-v1": reconnect_site,
    "disconnect-site-v1": disconnect_site, "suspend-site-v1": suspend_site, "unsuspend-site-v1": unsuspend_site,
    "check-site-v1": check_site, "activate-site-plugins-v1": activate_site_plugins,
    "deactivate-site-plugins-v1": deactivate_site_plugins, "delete-site-plugins-v1": delete_site_plugins,
    "get-abandoned-plugins-v1": get_abandoned_plugins, "activate-site-theme-v1": activate_site_theme,
    "delete-site-themes-v1": delete_site_themes, "get-abandoned-themes-v1": get_abandoned_themes,
    "get-site-security-v1": get_site_security, "get-site-changes-v1": get_site_changes,
    "get-site-client-v1": get_site_client, "get-site-costs-v1": get_site_costs, "count-sites-v1": count_sites,
    "get-sites-basic-v1": get_sites_basic, "reconnect-sites-v1": reconnect_sites,
    "disconnect-sites-v1": disconnect_sites, "check-sites-v1": check_sites, "suspend-sites-v1": suspend_sites,
}
