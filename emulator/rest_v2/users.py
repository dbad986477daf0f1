"""`/users`: the users of the child sites: list, create, edit, delete, CSV import, admin password."""

from __future__ import annotations

import csv
import io
from typing import Any

from emulator.records import Site, SiteUser
from emulator.rest import READ, RestError, RestRequest, RestRoutes, missing_params
from emulator.rest_v2.common import SITE_ID_OR_DOMAIN, sites_by_ids

routes = RestRoutes()
ROLES = ("administrator", "editor", "author", "contributor", "subscriber")


def _view(site: Site, user: SiteUser) -> dict[str, Any]:
    return {
        "id": user.id,
        "site_id": site.id,
        "website": site.url,
        "login": user.username,
        "email": user.email,
        "role": user.role,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "display_name": user.display_name or user.username,
    }


def _target_sites(req: RestRequest) -> list[Site]:
    ids = req.id_list("websites")
    sites = sites_by_ids(req, ids) if ids else []
    for tag_id in req.id_list("groups") or []:
        sites += req.state.list_sites(tag_id=tag_id)
    for client_id in req.id_list("clients") or []:
        sites += req.state.list_sites(client_id=client_id)
    return list({s.id: s for s in sites}.values())


@routes.add(READ, "/users")
async def list_users(req: RestRequest) -> dict[str, Any]:
    sites = _target_sites(req) or list(req.state.sites.values())
    roles = req.str_list("roles")
    search = (req.optional_text("search") or "").lower()
    rows = [
        _view(s, u)
        for s in sites
        for u in s.users
        if (not roles or u.role in roles) and (not search or search in (u.username + u.email).lower())
    ]
    return {"success": 1, "total": len(rows), "data": rows}


def _create(req: RestRequest, sites: list[Site], data: dict[str, Any]) -> list[dict[str, Any]]:
    role = str(data.get("role") or "subscriber")
    if role not in ROLES:
        raise RestError("rest_invalid_param", f"role must be one of {', '.join(ROLES)}.", 400)
    created = []
    for site in sites:
        if any(u.username == data["username"] for u in site.users):
            created.append({"site_id": site.id, "success": 0, "error": "Sorry, that username already exists!"})
            continue
        user = SiteUser(
            max((u.id for u in site.users), default=0) + 1,
            str(data["username"]),
            str(data["email"]),
            role,
            str(data.get("first_name", "")),
            str(data.get("last_name", "")),
        )
        site.users.append(user)
        created.append({"site_id": site.id, "success": 1, "data": _view(site, user)})
    req.state.save_sites(sites)
    return created


@routes.add("POST", "/users/create")
async def create_user(req: RestRequest) -> dict[str, Any]:
    missing = [n for n in ("username", "email") if not req.get(n)]
    if missing:
        raise missing_params(missing)
    sites = _target_sites(req)
    if not sites:
        raise RestError("rest_invalid_param", "Select websites, groups or clients.", 400)
    return {"success": 1, "data": _create(req, sites, req.params)}


@routes.add("POST", "/users/import")
async def import_users(req: RestRequest) -> dict[str, Any]:
    text = req.get("csv_file")
    if not isinstance(text, str) or not text.strip():
        raise missing_params(["csv_file"])
    rows = list(csv.reader(io.StringIO(text, newline=None)))  # \r, \n or \r\n end a line, as PHP's fgetcsv reads
    if req.boolean("has_header", True):
        rows = rows[1:]
    results = []
    for number, row in enumerate(rows, start=1):
        if len(row) < 4:
            results.append({"row": number, "success": 0, "error": "Expected username,email,role,site_ids."})
            continue
        username, email, role, site_ids = row[0], row[1], row[2], row[3]
        sites = [req.state.sites[int(i)] for i in site_ids.split(";") if i.isdigit() and int(i) in req.state.sites]
        try:
            results.append(
                {
                    "row": number,
                    "success": 1,
                    "data": _create(req, sites, {"username": username, "email": email, "role": role}),
                }
            )
        except RestError as error:
            results.append({"row": number, "success": 0, "error": error.message})
    return {"success": 1, "data": results}


def _find(req: RestRequest) -> tuple[Site, SiteUser]:
    site = req.state.find_site(req.path_params["id_domain"])
    user = None if site is None else next((u for u in site.users if u.id == int(req.path_params["user_id"])), None)
    if site is None or user is None:
        raise RestError(req.code("rest_invalid_user_id"), "Invalid or not found user ID.", 404)
    return site, user


@routes.add("PUT,PATCH", rf"/users/{SITE_ID_OR_DOMAIN}/(?P<user_id>\d+)/edit")
async def edit_user(req: RestRequest) -> dict[str, Any]:
    site, user = _find(req)
    if req.has("role"):
        if req.get("role") not in ROLES:
            raise RestError("rest_invalid_param", f"role must be one of {', '.join(ROLES)}.", 400)
        user.role = str(req.get("role"))
    for name in ("email", "first_name", "last_name", "display_name"):
        if req.has(name):
            setattr(user, name, str(req.get(name)))
    req.state.save_site(site)
    return {"success": 1, "data": _view(site, user)}


@routes.add("DELETE", rf"/users/{SITE_ID_OR_DOMAIN}/(?P<user_id>\d+)/delete")
async def delete_user(req: RestRequest) -> dict[str, Any]:
    site, user = _find(req)
    site.users.remove(user)
    req.state.save_site(site)
    return {"success": 1, "data": _view(site, user)}


@routes.add("PUT,PATCH", "/users/update-admin-password")
async def update_admin_password(req: RestRequest) -> dict[str, Any]:
    if not req.get("password"):
        raise missing_params(["password"])
    sites = _target_sites(req)
    if not sites:
        raise RestError("rest_invalid_param", "Select websites, groups or clients.", 400)
    return {"success": 1, "data": {str(s.id): {"success": 1} for s in sites}}
