"""Legacy v1 (`/<ns>/v1/sites/<callback>`, `/<ns>/v1/site/<callback>`): consumer key/secret, raw rows,
one fixed method per route, served only while the v1 compatibility option is on. Domain work goes through
the same state and operations as v2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.operations import SiteSuspended, SiteUnavailable
from emulator.records import Item, ItemType, Site
from emulator.rest import RestRequest, RestResponse, RestRoutes
from emulator.rest_v2.shapes import site_simple, site_view

MISSING = RestResponse({"ERROR": "Required parameter is missing."}, 400)
ItemFilter = Callable[[Item], bool]
UPDATE_CALLBACKS: tuple[tuple[str, ItemType], ...] = (
    ("site-update-wordpress", "wp"),
    ("site-update-plugins", "plugin"),
    ("site-update-themes", "theme"),
    ("site-update-translations", "translation"),
)


def _rows(sites: list[Site]) -> dict[str, Any]:
    return {str(s.id): site_simple(s) for s in sites}


def _site(req: RestRequest) -> Site | RestResponse:
    value = req.optional_text("site_id") or req.optional_text("id") or req.optional_text("url")
    if not value:
        return MISSING
    site = req.state.find_site(value)
    return site if site is not None else RestResponse({"ERROR": "Site not found."}, 404)


def _items(site: Site, kind: str, keep: ItemFilter) -> list[dict[str, Any]]:
    items = site.plugins if kind == "plugins" else site.themes
    return [
        {"slug": i.slug, "name": i.name, "version": i.version, "active": int(i.active)}
        for i in items.values()
        if keep(i)
    ]


def build_v1_routes() -> RestRoutes:
    routes = RestRoutes()

    def site_route(method: str, callback: str, answer: Callable[[RestRequest, Site], Any]) -> None:
        @routes.add(method, f"/site/{callback}")
        async def handler(req: RestRequest) -> Any:
            site = _site(req)
            return site if isinstance(site, RestResponse) else await answer(req, site)

    def listing(name: str, status: str | None) -> None:
        @routes.add("GET", f"/sites/{name}")
        async def rows(req: RestRequest) -> Any:
            return _rows(req.state.list_sites(status=status))

        @routes.add("GET", f"/sites/{name}-count")
        async def count(req: RestRequest) -> Any:
            return {"count": len(req.state.list_sites(status=status))}

    listing("all-sites", None)
    listing("connected-sites", "connected")
    listing("disconnected-sites", "disconnected")

    @routes.add("GET", "/sites/sites-available-updates-count")
    async def available_count(req: RestRequest) -> Any:
        return {"count": len(req.state.all_pending_updates())}

    @routes.add("GET", "/sites/http-status")
    async def http_status(req: RestRequest) -> Any:
        return {str(s.id): {"http_code": s.http_code} for s in req.state.sites.values()}

    @routes.add("GET", "/sites/health-score")
    async def health_score(req: RestRequest) -> Any:
        return {str(s.id): {"health_score": s.health_score} for s in req.state.sites.values()}

    @routes.add("GET", "/sites/security-issues")
    async def security_issues(req: RestRequest) -> Any:
        return {str(s.id): {"issues": int(not s.url.startswith("https"))} for s in req.state.sites.values()}

    @routes.add("GET", "/sites/get-sites-by-url")
    async def by_url(req: RestRequest) -> Any:
        urls = req.str_list("urls") or req.str_list("url")
        if not urls:
            return MISSING
        return _rows([s for s in (req.state.find_site(u) for u in urls) if s is not None])

    @routes.add("GET", "/sites/get-sites-by-client")
    async def by_client(req: RestRequest) -> Any:
        client = req.state.find_client(req.optional_text("client_id") or req.optional_text("client") or "")
        return MISSING if client is None else _rows(req.state.client_sites(client))

    @routes.add("POST", "/sites/sync-sites")
    async def sync_sites(req: RestRequest) -> Any:
        results = await req.ops.sync_many(list(req.state.sites.values()))
        return {str(r.site.id): "success" if r.ok else "failed" for r in results}

    @routes.add("POST", "/sites/check-sites")
    async def check_sites(req: RestRequest) -> Any:
        results = await req.ops.check_many(list(req.state.sites.values()))
        return {str(r.site.id): {"http_code": r.http_code, "online": int(r.online)} for r in results}

    @routes.add("POST", "/sites/disconnect-sites")
    async def disconnect_sites(req: RestRequest) -> Any:
        return {
            str(s.id): "success" if await req.ops.disconnect(s, mark_local=False) else "failed"
            for s in list(req.state.sites.values())
        }

    async def one_site(req: RestRequest, site: Site) -> Any:
        return site_view(req.state, site)

    async def site_info(req: RestRequest, site: Site) -> Any:
        return {
            "wpversion": site.wp_version,
            "phpversion": site.php_version,
            "child_version": site.child_version,
            "mysql_version": site.mysql_version,
            "memory_limit": site.memory_limit,
        }

    site_route("GET", "site", one_site)
    site_route("GET", "site-info", site_info)
    for kind in ("plugins", "themes"):
        for prefix, keep in (
            ("installed", lambda i: True),
            ("active", lambda i: i.active),
            ("inactive", lambda i: not i.active),
        ):

            async def item_rows(req: RestRequest, site: Site, kind: str = kind, keep: ItemFilter = keep) -> Any:
                return _items(site, kind, keep)

            async def item_count(req: RestRequest, site: Site, kind: str = kind, keep: ItemFilter = keep) -> Any:
                return {"count": len(_items(site, kind, keep))}

            site_route("GET", f"site-{prefix}-{kind}", item_rows)
            site_route("GET", f"site-{prefix}-{kind}-count", item_count)

        async def abandoned(req: RestRequest, site: Site) -> Any:
            return []

        async def abandoned_count(req: RestRequest, site: Site) -> Any:
            return {"count": 0}

        site_route("GET", f"site-abandoned-{kind}", abandoned)
        site_route("GET", f"site-abandoned-{kind}-count", abandoned_count)

    async def available_updates(req: RestRequest, site: Site) -> Any:
        return [
            {
                "type": u.type,
                "slug": u.slug,
                "name": u.name,
                "current_version": u.current_version,
                "new_version": u.new_version,
            }
            for u in req.state.pending_updates(site)
        ]

    async def available_updates_count(req: RestRequest, site: Site) -> Any:
        return {"count": len(req.state.pending_updates(site))}

    async def site_http_status(req: RestRequest, site: Site) -> Any:
        return {"http_code": site.http_code}

    async def site_health(req: RestRequest, site: Site) -> Any:
        return {"health_score": site.health_score}

    async def sync_site(req: RestRequest, site: Site) -> Any:
        return {"result": "success" if (await req.ops.sync(site)).ok else "failed"}

    async def reconnect(req: RestRequest, site: Site) -> Any:
        return {"result": "success" if await req.ops.reconnect(site) else "failed"}

    async def disconnect(req: RestRequest, site: Site) -> Any:
        return {"result": "success" if await req.ops.disconnect(site, mark_local=False) else "failed"}

    async def remove(req: RestRequest, site: Site) -> Any:
        req.state.remove_site(site)
        return {"result": "success"}

    async def check(req: RestRequest, site: Site) -> Any:
        result = await req.ops.check(site)
        return {"http_code": result.http_code, "online": int(result.online)}

    site_route("GET", "site-available-updates", available_updates)
    site_route("GET", "site-available-updates-count", available_updates_count)
    site_route("GET", "site-http-status", site_http_status)
    site_route("GET", "site-health-score", site_health)
    site_route("POST", "sync-site", sync_site)
    site_route("POST", "reconnect-site", reconnect)
    site_route("POST", "disconnect-site", disconnect)
    site_route("DELETE", "remove-site", remove)
    site_route("POST", "check-site-http-status", check)

    for callback, item_type in UPDATE_CALLBACKS:

        async def update(req: RestRequest, site: Site, item_type: ItemType = item_type) -> Any:
            try:
                results = await req.ops.update_items(site, item_type, req.str_list("slug"))
            except (SiteSuspended, SiteUnavailable) as error:
                return RestResponse({"ERROR": getattr(error, "message", "The site is suspended.")}, 400)
            return {
                r.slug: {
                    "result": "success" if r.reported_success else "failed",
                    "old_version": r.old_version,
                    "new_version": r.new_version,
                    **({"error": r.error} if r.error else {}),
                }
                for r in results
            }

        site_route("PUT", callback, update)

    return routes
