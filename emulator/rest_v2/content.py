"""`/posts` and `/pages`: a cross-site list and CRUD on each site's small generated set."""

from __future__ import annotations

import time
from typing import Any

from emulator.records import Post, Site
from emulator.rest import READ, RestError, RestRequest, RestRoutes
from emulator.rest_v2.common import SITE_ID_OR_DOMAIN, site_or_404, sites_by_ids

routes = RestRoutes()
STATUSES = ("publish", "draft", "pending", "private", "future", "trash")


def _view(site: Site, post: Post) -> dict[str, Any]:
    return {
        "id": post.id,
        "site_id": site.id,
        "website": site.url,
        "title": post.title,
        "status": post.status,
        "post_type": post.post_type,
        "author": post.author,
        "content": post.content,
        "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(post.date)),
    }


def _family(post_type: str, plural: str, id_name: str) -> None:
    @routes.add(READ, f"/{plural}")
    async def list_all(req: RestRequest) -> dict[str, Any]:
        site_ids = req.id_list("websites")
        sites = sites_by_ids(req, site_ids) if site_ids else list(req.state.sites.values())
        status = req.optional_text("status")
        search = (req.optional_text("search") or "").lower()
        maximum = req.integer("maximum", 50, minimum=1) or 50
        rows = [
            _view(s, p)
            for s in sites
            for p in s.posts
            if p.post_type == post_type
            and (not status or p.status == status)
            and (not search or search in p.title.lower())
        ]
        return {"success": 1, "total": len(rows[:maximum]), "data": rows[:maximum]}

    def find(req: RestRequest) -> tuple[Site, Post]:
        site = site_or_404(req)
        post_id = int(req.path_params[id_name])
        post = next((p for p in site.posts if p.id == post_id and p.post_type == post_type), None)
        if post is None:
            raise RestError(req.code(f"rest_invalid_{post_type}_id"), f"Invalid or not found {post_type} ID.", 404)
        return site, post

    @routes.add(READ, rf"/{plural}/{SITE_ID_OR_DOMAIN}/(?P<{id_name}>\d+)")
    async def get_one(req: RestRequest) -> dict[str, Any]:
        site, post = find(req)
        return {"success": 1, "data": _view(site, post)}

    def _status(req: RestRequest) -> str | None:
        status = req.get("status") or req.get("post_status")
        if status is not None and status not in STATUSES:
            raise RestError("rest_invalid_param", f"status must be one of {', '.join(STATUSES)}.", 400)
        return status

    @routes.add("PUT,PATCH", rf"/{plural}/{SITE_ID_OR_DOMAIN}/(?P<{id_name}>\d+)/update-status")
    async def update_status(req: RestRequest) -> dict[str, Any]:
        site, post = find(req)
        status = _status(req)
        if status is None:
            raise RestError("rest_missing_callback_param", "Missing parameter(s): status", 400, params=["status"])
        post.status = status
        req.state.save_site(site)
        return {"success": 1, "data": _view(site, post)}

    @routes.add("PUT,PATCH", rf"/{plural}/{SITE_ID_OR_DOMAIN}/(?P<{id_name}>\d+)/edit")
    async def edit(req: RestRequest) -> dict[str, Any]:
        site, post = find(req)
        post.title = str(req.get("post_title", post.title))
        post.content = str(req.get("post_content", post.content))
        post.status = _status(req) or post.status
        req.state.save_site(site)
        return {"success": 1, "data": _view(site, post)}

    @routes.add("POST", rf"/{plural}/{SITE_ID_OR_DOMAIN}/create")
    async def create(req: RestRequest) -> dict[str, Any]:
        site = site_or_404(req)
        title = str(req.get("post_title") or "").strip()
        if not title:
            raise RestError(
                "rest_missing_callback_param", "Missing parameter(s): post_title", 400, params=["post_title"]
            )
        post = Post(
            max((p.id for p in site.posts), default=0) + 1,
            post_type,
            title,
            _status(req) or "draft",
            str(req.get("post_content", "")),
            "admin",
            req.state.now(),
        )
        site.posts.append(post)
        req.state.save_site(site)
        return {"success": 1, "data": _view(site, post)}

    @routes.add("DELETE", rf"/{plural}/{SITE_ID_OR_DOMAIN}/(?P<{id_name}>\d+)/delete")
    async def delete(req: RestRequest) -> dict[str, Any]:
        site, post = find(req)
        site.posts.remove(post)
        req.state.save_site(site)
        return {"success": 1, "data": _view(site, post)}


_family("post", "posts", "id_post")
_family("page", "pages", "id_page")
