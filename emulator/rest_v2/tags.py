"""`/tags`: CRUD (delete is `/remove`; the spec's `/delete` is served too), sites and clients of a tag."""

from __future__ import annotations

import re
from typing import Any

from emulator.records import Tag
from emulator.rest import EDITABLE, READ, RestError, RestRequest, RestRoutes
from emulator.rest_v2.common import paged
from emulator.rest_v2.shapes import client_view, site_view, tag_view

routes = RestRoutes()
COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")


def tag_or_404(req: RestRequest, tag_id: Any) -> Tag:
    tag = req.state.tags.get(int(tag_id)) if str(tag_id).isdigit() else None
    if tag is None:
        raise RestError(req.code("rest_invalid_tag_id"), "Invalid or not found ID.", 404)
    return tag


@routes.add(READ, "/tags")
async def list_tags(req: RestRequest) -> dict[str, Any]:
    tags = req.state.list_tags(req.optional_text("search"), req.id_list("include"), req.id_list("exclude"))
    page = paged(req, tags)
    return {"success": 1, "total": len(tags), "data": {str(t.id): tag_view(req.state, t) for t in page} or []}


@routes.add(READ, r"/tags/(?P<id>\d+)")
async def get_tag(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": tag_view(req.state, tag_or_404(req, req.path_params["id"]))}


def create_tag_from(req: RestRequest, data: dict[str, Any]) -> dict[str, Any]:
    name = str(data.get("name") or "").strip()
    color = str(data.get("color") or "").strip()
    if not name or (color and not COLOR.match(color)):
        return {"success": 0, "error": "Add tag failed. Please try again."}
    tag = req.state.add_tag(name, color)
    return {"success": 1, "message": "Tag created successfully.", "data": tag_view(req.state, tag)}


def edit_tag_from(req: RestRequest, tag: Tag, data: dict[str, Any]) -> dict[str, Any]:
    color = data.get("color")
    if color is not None and str(color) and not COLOR.match(str(color)):
        raise RestError(req.code("rest_invalid_param"), "color must be a hex colour of the form #rrggbb.", 400)
    req.state.edit_tag(tag, str(data.get("name") or "").strip() or None, None if color is None else str(color))
    return {"success": 1, "message": "Tag updated successfully.", "data": tag_view(req.state, tag, after_write=True)}


def delete_tag_for(req: RestRequest, tag: Tag) -> dict[str, Any]:
    req.state.delete_tag(tag)
    return {"success": 1, "message": "Tag deleted successfully.", "data": tag_view(req.state, tag, after_write=True)}


@routes.add("POST", "/tags/add")
async def add_tag(req: RestRequest) -> dict[str, Any]:
    return create_tag_from(req, req.params)


@routes.add(EDITABLE, r"/tags/(?P<id>\d+)/edit")
async def edit_tag(req: RestRequest) -> dict[str, Any]:
    return edit_tag_from(req, tag_or_404(req, req.path_params["id"]), req.params)


@routes.add("DELETE", r"/tags/(?P<id>\d+)/(?:remove|delete)")
async def remove_tag(req: RestRequest) -> dict[str, Any]:
    return delete_tag_for(req, tag_or_404(req, req.path_params["id"]))


@routes.add(READ, r"/tags/(?P<id>\d+)/sites")
async def tag_sites(req: RestRequest) -> dict[str, Any]:
    tag = tag_or_404(req, req.path_params["id"])
    sites = req.state.list_sites(tag_id=tag.id)
    return {"success": 1, "total": len(sites), "data": [site_view(req.state, s) for s in paged(req, sites)]}


@routes.add(READ, r"/tags/(?P<id>\d+)/clients")
async def tag_clients(req: RestRequest) -> dict[str, Any]:
    tag = tag_or_404(req, req.path_params["id"])
    client_ids = {s.client_id for s in req.state.list_sites(tag_id=tag.id) if s.client_id}
    clients = [c for c in req.state.list_clients() if c.id in client_ids]
    return {"success": 1, "total": len(clients), "data": [client_view(c) for c in paged(req, clients)]}
