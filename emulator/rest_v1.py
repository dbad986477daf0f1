"""Legacy v1 (`/<ns>/v1/sites/<callback>`, `/<ns>/v1/site/<callback>`): consumer key/secret, raw rows,
one fixed method per route, served only while the v1 compatibility option is on."""

from __future__ import annotations

from typing import Any

from emulator.records import Site
from emulator.rest import RestRequest, RestResponse, RestRoutes
from emulator.rest_v2.shapes import site_simple, site_view

MISSING = RestResponse({"ERROR": "Required parameter is missing."}, 400)


def _rows(sites: list[Site]) -> dict[str, Any]:
    return {str(s.id): site_simple(s) for s in sites}


def _site(req: RestRequest) -> Site | RestResponse:
    value = req.get("site_id") or req.get("id") or req.get("url")
    if not value:
        return MISSING
    site = req.state.find_site(str(value))
    return site if site is not None else RestResponse({"ERROR": "Site not found."}, 404)


def build_v1_routes() -> RestRoutes:
    routes = RestRoutes()

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

    @routes.add("POST", "/sites/sync-sites")
    async def sync_sites(req: RestRequest) -> Any:
        results = await req.ops.sync_many(list(req.state.sites.values()))
        return {str(r.site.id): "success" if r.ok else "failed" for r in results}

    @routes.add("POST", "/sites/check-sites")
    async def check_sites(req: RestRequest) -> Any:
        results = await req.ops.check_many(list(req.state.sites.values()))
        return {str(r.site.id): {"http_code": r.http_code, "online": int(r.online)} for r in results}

    @routes.add("GET", "/site/site")
    async def one_site(req: RestRequest) -> Any:
        site = _site(req)
        return site if isinstance(site, RestResponse) else site_view(req.state, site)

    @routes.add("GET", "/site/site-available-updates")
    async def site_updates(req: RestRequest) -> Any:
        site = _site(req)
        if isinstance(site, RestResponse):
            return site
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

    @routes.add("GET", "/site/site-available-updates-count")
    async def site_updates_count(req: RestRequest) -> Any:
        site = _site(req)
        return site if isinstance(site, RestResponse) else {"count": len(req.state.pending_updates(site))}

    @routes.add("GET", "/site/site-installed-plugins")
    async def site_plugins(req: RestRequest) -> Any:
        site = _site(req)
        if isinstance(site, RestResponse):
            return site
        return [
            {"slug": i.slug, "name": i.name, "version": i.version, "active": int(i.active)}
            for i in site.plugins.values()
        ]

    @routes.add("POST", "/site/sync-site")
    async def sync_site(req: RestRequest) -> Any:
        site = _site(req)
        if isinstance(site, RestResponse):
            return site
        result = await req.ops.sync(site)
        return {"result": "success" if result.ok else "failed"}

    return routes
