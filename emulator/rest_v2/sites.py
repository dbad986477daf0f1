"""`/sites`: inventory, sync, check, connection, suspension, plugins and themes, add, edit, remove."""

from __future__ import annotations

from typing import Any

from emulator.jobs import CHILD_OUTDATED, child_outdated
from emulator.operations import SiteUnavailable
from emulator.records import Site
from emulator.rest import EDITABLE, READ, RestError, RestRequest, RestRoutes, check_types, no_route
from emulator.rest_v2.common import paged, queue_if_large, site_or_404, sync_through_ability
from emulator.rest_v2.shapes import client_row, cost_view, site_simple, site_view
from emulator.state import SITE_STATUSES

routes = RestRoutes()
ID = r"(?P<id_domain>[a-zA-Z0-9\-\.\_:%]+)"


def _filtered(req: RestRequest) -> list[Any]:
    status = req.get("status")
    if status is not None and status not in SITE_STATUSES:
        raise RestError(
            req.code("rest_invalid_param"), "The status argument should be: " + ",".join(SITE_STATUSES), 400
        )
    return req.state.list_sites(
        status=status,
        search=req.optional_text("search"),
        include=req.id_list("include"),
        exclude=req.id_list("exclude"),
    )


@routes.add(READ, "/sites")
async def list_sites(req: RestRequest) -> dict[str, Any]:
    per_page = req.integer("per_page", None, minimum=0)
    if per_page is not None and per_page > 100:
        raise RestError(
            "ability_invalid_input",
            f'Ability "{req.ns}/list-sites-v1" has invalid input. '
            "Reason: input[per_page] must be less than or equal to 100",
            500,
        )
    sites = _filtered(req)
    return {
        "success": 1,
        "total": len(sites),
        "data": [site_view(req.state, s) for s in paged(req, sites, default_per_page=20)],
    }


@routes.add(READ, "/sites/basic")
async def list_basic(req: RestRequest) -> dict[str, Any]:
    sites = _filtered(req)
    return {"success": 1, "total": len(sites), "data": [site_simple(s) for s in paged(req, sites)]}


@routes.add(READ, "/sites/count")
async def count_sites(req: RestRequest) -> dict[str, Any]:
    return {"count": len(_filtered(req))}


def _selected(req: RestRequest) -> list[Any]:
    return req.state.list_sites(include=req.id_list("include"), exclude=req.id_list("exclude"))


@routes.add(EDITABLE, "/sites/sync")
async def sync_all(req: RestRequest) -> dict[str, Any]:
    sites = _selected(req)
    job_id = queue_if_large(req, "sync", [s.id for s in sites])
    if job_id is not None:
        return {
            "success": 1,
            "message": "Sync queued for background processing.",
            "job_id": job_id,
            "total": len(sites),
        }
    synced = [(site, await sync_through_ability(req, site)) for site in sites]
    return {
        "total": len(synced),
        "data": {
            str(site.id): ({"result": "success", **site_view(req.state, site)} if ok else {"result": "failed"})
            for site, ok in synced
        },
    }


@routes.add(EDITABLE, "/sites/check")
async def check_all(req: RestRequest) -> dict[str, Any]:
    results = await req.ops.check_many(_selected(req))
    return {
        "total": len(results),
        "data": {
            str(r.site.id): {
                "result": "success" if r.online else "failed",
                **site_view(req.state, r.site, empty_tags=""),
            }
            for r in results
        },
    }


@routes.add(EDITABLE, "/sites/reconnect")
async def reconnect_all(req: RestRequest) -> dict[str, Any]:
    data = {}
    for site in _selected(req):
        if req.state.site_status(site) == "disconnected":
            data[str(site.id)] = "success" if await req.ops.reconnect(site) else "failed"
    return {"total": len(data), "data": data}


@routes.add(EDITABLE, "/sites/disconnect")
async def disconnect_all(req: RestRequest) -> dict[str, Any]:
    data = {}
    for site in _selected(req):
        data[str(site.id)] = "success" if await req.ops.disconnect(site, mark_local=False) else "failed"
    return {"total": len(data), "data": data}


@routes.add(READ, r"/sites/(?P<id_domain>\d+)")
async def get_site_by_id(req: RestRequest) -> dict[str, Any]:
    site = req.state.find_site(req.path_params["id_domain"])
    if site is None:  # the real route goes through get-site-v1 and surfaces its permission error as 500
        raise RestError(
            "ability_invalid_permissions", f'Ability "{req.ns}/get-site-v1" does not have necessary permission.', 500
        )
    return {"data": site_view(req.state, site)}


@routes.add(READ, r"/sites/(?P<id_domain>[A-Za-z0-9\-\.]*[A-Za-z0-9\-]{1,63}\.[A-Za-z]{2,6}(?::\d+)?)")
async def get_site_by_domain(req: RestRequest) -> dict[str, Any]:
    site = req.state.find_site(req.path_params["id_domain"])
    if site is None:
        raise RestError(req.code("site_not_found"), "Site not found.", 404)
    return {"data": site_view(req.state, site)}


def add_site_from(req: RestRequest, data: dict[str, Any]) -> dict[str, Any]:
    """Shared by `/sites/add` and the batch `create` items."""
    url = str(data.get("url") or "").strip()
    if not url:
        return {"success": 0, "error": "Please enter a valid URL for your site."}
    if "://" not in url:
        url = "https://" + url
    url = url.rstrip("/") + "/"
    existing = req.state.find_site(url)
    if existing is not None:
        return {"success": 0, "error": "The site is already connected to your dashboard.", "found_id": str(existing.id)}
    if not data.get("admin") or not data.get("adminpassword"):
        return {
            "success": 0,
            "error": "Unable to connect to the site. Please verify that your Admin Username and "
            "Password are correct and try again.",
        }
    tag_ids = [int(t) for t in str(data.get("groupids") or "").split(",") if t.strip().isdigit()]
    client_id = int(data.get("client_id") or 0) if str(data.get("client_id") or "0").isdigit() else 0
    site = req.state.add_site(
        url,
        str(data.get("name") or url.split("://", 1)[1].rstrip("/")),
        admin=str(data["admin"]),
        client_id=client_id,
        tag_ids=tag_ids,
    )
    return {
        "success": 1,
        "data": site_simple(site),
        "message": "Site successfully added - Visit the Site&#039;s Dashboard now.",
    }


@routes.add("POST", "/sites/add")
async def add_site(req: RestRequest) -> dict[str, Any]:
    return add_site_from(req, req.params)


# The single-valued fields of the site edit schema (SiteEditInput) that the emulator reads.
EDIT_FIELD_TYPES = {
    "name": "string", "groupids": "string", "client_id": "integer", "suspended": "integer",
    "ignore_core_updates": "integer", "ignore_plugin_updates": "integer", "ignore_theme_updates": "integer",
    "note": "string",
}


def edit_site_from(req: RestRequest, site: Any, data: dict[str, Any]) -> dict[str, Any]:
    check_types(data, EDIT_FIELD_TYPES)
    if "name" in data and str(data["name"]).strip():
        site.name = str(data["name"]).strip()
    if "groupids" in data:
        req.state.set_site_tags(site, [int(t) for t in str(data["groupids"]).split(",") if t.strip().isdigit()])
    if "client_id" in data:
        value = str(data["client_id"])
        if not value.isdigit():
            return {"success": 0, "error": "Invalid client id."}
        site.client_id = int(value)
    for flag, attribute in (
        ("suspended", "suspended"),
        ("ignore_core_updates", "ignore_core_updates"),
        ("ignore_plugin_updates", "ignore_plugin_updates"),
        ("ignore_theme_updates", "ignore_theme_updates"),
    ):
        if flag in data:
            setattr(site, attribute, str(data[flag]).lower() in ("1", "true", "yes"))
    if "note" in data:
        site.note = str(data["note"])
    req.state.save_site(site)
    return {"success": 1, "data": site_view(req.state, site)}


@routes.add(EDITABLE, rf"/sites/{ID}/edit")
async def edit_site(req: RestRequest) -> dict[str, Any]:
    return edit_site_from(req, site_or_404(req), req.params)


@routes.add(EDITABLE, rf"/sites/{ID}/sync")
async def sync_site(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    if not await sync_through_ability(req, site):
        return {"success": 0, "data": []}
    return {"success": 1, "data": site_view(req.state, site)}


@routes.add(READ, rf"/sites/{ID}/security")
async def security(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    outdated = any(i.known_offer for i in site.plugins.values())
    return {
        "data": {
            "db_reporting": "Y_UNABLE",
            "php_reporting": "Y_UNABLE",
            "wp_uptodate": "N" if site.known_wp_offer else "Y",
            "phpversion_matched": "Y",
            "sslprotocol": "Y" if site.url.startswith("https") else "N",
            "debug_disabled": "Y",
            "sec_outdated_plugins": "Y" if outdated else "N",
            "sec_inactive_plugins": "N",
            "sec_outdated_themes": "Y" if any(i.known_offer for i in site.themes.values()) else "N",
            "sec_inactive_themes": "N",
            "fetch_url_output": {"http_status": site.http_code, "connection_step": "verify_credentials"},
        },
        "site": site_simple(site),
    }


def _items_listing(req: RestRequest, kind: str) -> dict[str, Any]:
    site = site_or_404(req)
    paging = (req.get("page") or req.get("paged")) and req.get("per_page")
    if not (req.optional_text("search") or req.get("must_use") or paging) and child_outdated(site):
        # without search, must_use or paging the route lists through `get-site-{kind}s-v1`, and its gate refuses
        raise RestError(req.code("child_outdated"), CHILD_OUTDATED, 400)
    items = site.plugins if kind == "plugin" else site.themes
    data = [
        {
            "slug": i.slug,
            "name": i.name,
            "version": i.known_version or i.version,
            "active": i.active,
            "update_version": i.known_offer,
        }
        for i in items.values()
    ]
    search = req.optional_text("search")
    if search:
        data = [d for d in data if str(search).lower() in (d["name"] + d["slug"]).lower()]
    status = req.get("status")
    if status in ("active", "inactive"):
        data = [d for d in data if d["active"] == (status == "active")]
    return {"success": 1, "total": len(data), "data": paged(req, data), "site": site_simple(site)}


@routes.add(READ, rf"/sites/{ID}/plugins")
async def plugins(req: RestRequest) -> dict[str, Any]:
    return _items_listing(req, "plugin")


@routes.add(READ, rf"/sites/{ID}/themes")
async def themes(req: RestRequest) -> dict[str, Any]:
    return _items_listing(req, "theme")


def _slugs_or_error(req: RestRequest, kind: str) -> list[str]:
    slugs = req.str_list("slug")
    if not slugs:
        raise RestError(req.code(f"rest_invalid_{kind}s_slugs"), f"Invalid {kind}s slugs.", None)
    return slugs


async def _plugin_toggle(req: RestRequest, active: bool) -> dict[str, Any]:
    site = site_or_404(req)
    slugs = _slugs_or_error(req, "plugin")
    try:
        changed = await req.ops.set_plugins_active(site, slugs, active)
    except SiteUnavailable as error:
        if error.thrown is not None:  # `handle_plugins_actions_of_site` turns fetch_url's exception into its error
            action = "activate" if active else "deactivate"
            raise RestError(req.code(f"rest_{action}_plugins_action"), error.thrown, None) from None
        return {"success": 0, "data": {"error": error.message}, "site": site_simple(site)}
    data = [{"name": item.name, "version": item.version, "slug": item.slug} for item in changed]
    return {"success": 1 if data else 0, "data": data, "site": site_simple(site)}


@routes.add(EDITABLE, rf"/sites/{ID}/plugins/activate")
async def activate_plugins(req: RestRequest) -> dict[str, Any]:
    return await _plugin_toggle(req, True)


@routes.add(EDITABLE, rf"/sites/{ID}/plugins/deactivate")
async def deactivate_plugins(req: RestRequest) -> dict[str, Any]:
    return await _plugin_toggle(req, False)


@routes.add("DELETE", rf"/sites/{ID}/plugins/delete")
async def delete_plugins(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    data = []
    for slug in _slugs_or_error(req, "plugin"):
        item = site.plugins.pop(slug, None)
        if item is not None:
            data.append({"name": item.name, "version": item.version, "slug": slug})
    req.state.save_site(site)
    return {"success": 1 if data else 0, "data": data, "site": site_simple(site)}


@routes.add(EDITABLE, rf"/sites/{ID}/themes/activate")
async def activate_theme(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    slug = _slugs_or_error(req, "theme")[0]
    theme = site.themes.get(slug)
    if theme is None:
        return {"success": 0, "data": {"error": f"The theme {slug} is not installed."}, "site": site_simple(site)}
    previous = next((t for t in site.themes.values() if t.active), None)
    for item in site.themes.values():
        item.active = item.slug == slug
    req.state.save_site(site)
    deactivated = {"name": previous.name, "version": previous.version, "slug": previous.slug} if previous else {}
    return {
        "success": 1,
        "data": {"activate": {"name": theme.name, "version": theme.version, "slug": slug}, "deactivate": deactivated},
        "site": site_simple(site),
    }


@routes.add("DELETE", rf"/sites/{ID}/themes/delete")
async def delete_themes(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    deleted = {}
    for slug in _slugs_or_error(req, "theme"):
        theme = site.themes.get(slug)
        if theme is None:
            continue
        if theme.active:
            return {"success": 0, "data": {"error": f"The theme {theme.name} is active."}, "site": site_simple(site)}
        deleted[slug] = {"name": theme.name, "version": theme.version, "slug": slug}
        del site.themes[slug]
    req.state.save_site(site)
    return {"success": 1, "data": {"delete": deleted}, "site": site_simple(site)}


@routes.add(READ, rf"/sites/{ID}/(?P<kind>plugins|themes)/abandoned")
async def abandoned(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    return {"success": 1, "total": 0, "data": {}, "site": site_simple(site)}


@routes.add(READ, rf"/sites/{ID}/non-(?P<brand>[a-z]+)-changes")
async def non_dashboard_changes(req: RestRequest) -> dict[str, Any]:
    """Changes made on the child outside the dashboard (`/non-svc-changes` or `/non-mainwp-changes`)."""
    if req.path_params["brand"] != req.ns:
        raise no_route()
    site = site_or_404(req)
    return {"success": 1, "total": 0, "data": [], "site": site_simple(site)}


@routes.add(EDITABLE, rf"/sites/{ID}/reconnect")
async def reconnect(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    return _connection_answer(site, await req.ops.reconnect(site), "Unable to reconnect: the site cannot be reached.")


@routes.add(EDITABLE, rf"/sites/{ID}/disconnect")
async def disconnect(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    return _connection_answer(site, await req.ops.disconnect(site, mark_local=False), "The site cannot be reached.")


def _connection_answer(site: Site, ok: bool, failure: str) -> dict[str, Any]:
    answer = {"success": int(ok), "data": site_simple(site)}
    return answer if ok else {**answer, "error": failure}


@routes.add(EDITABLE, rf"/sites/{ID}/suspend")
async def suspend(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    req.ops.suspend(site)
    return {"success": 1, "suspended": 1, "data": site_simple(site)}


@routes.add(EDITABLE, rf"/sites/{ID}/unsuspend")
async def unsuspend(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    req.ops.unsuspend(site)
    return {"success": 1, "suspended": 0, "data": site_simple(site)}


async def check_one(req: RestRequest, site: Any) -> dict[str, Any]:
    result = await req.ops.check(site)
    return {
        "success": 1,
        "data": {**site_simple(site), "status": 1 if result.http_code == 200 else 0, "http_code": result.http_code},
    }


@routes.add(EDITABLE, rf"/sites/{ID}/check")
async def check(req: RestRequest) -> dict[str, Any]:
    return await check_one(req, site_or_404(req))


@routes.add("DELETE", rf"/sites/{ID}/remove")
async def remove(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    req.state.remove_site(site)
    return {
        "success": 1,
        "message": "The site has been removed and the Child plugin has been disabled.",
        "data": site_simple(site),
    }


@routes.add(READ, rf"/sites/{ID}/client")
async def site_client(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    client = req.state.clients.get(site.client_id)
    if client is None:
        return {"success": 0, "error": "Client is not set or not found."}
    return {"success": 1, "data": client_row(client)}


@routes.add(READ, rf"/sites/{ID}/costs", module="cost-tracker")
async def site_costs(req: RestRequest) -> dict[str, Any]:
    costs = req.state.site_costs(site_or_404(req))
    if not costs:
        return {"success": 1, "message": "Cost not found.", "data": []}
    return {"success": 1, "total": len(costs), "data": {str(c.id): cost_view(c) for c in costs}}
