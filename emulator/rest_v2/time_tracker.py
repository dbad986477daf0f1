"""`/time-tracker` (the Time Tracker extension): tasks with a running timer, per client and per site."""

from __future__ import annotations

from typing import Any

from emulator.rest import EDITABLE, READ, RestError, RestRequest, RestRoutes, missing_params
from emulator.rest_v2.clients import client_or_404
from emulator.rest_v2.common import SITE_ID_OR_DOMAIN, site_or_404
from emulator.rest_v2.shapes import client_view

routes = RestRoutes()
MODULE = "time-tracker"
KIND = "time_tracker_tasks"
CLIENT = r"(?P<id_email>[a-zA-Z0-9\_\-\.\@\%\+]+)"
SETTINGS = {"rounding_minutes": 15, "billable_default": True, "currency": "USD", "hourly_rate": 0}


def _tasks(req: RestRequest) -> list[dict[str, Any]]:
    return sorted(req.state.records(KIND).values(), key=lambda t: t["id"])


def _bucket(client_id: int, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    own = [t for t in tasks if t["client_id"] == client_id]
    return {
        "id": client_id,
        "name": "Unassigned" if client_id == 0 else f"Client {client_id}",
        "client_id": client_id,
        "tasks": len(own),
        "seconds": sum(t["seconds"] for t in own),
    }


@routes.add(READ, "/time-tracker", module=MODULE)
async def list_tasks(req: RestRequest) -> dict[str, Any]:
    tasks = _tasks(req)
    return {"success": 1, "total": len(tasks), "data": tasks}


@routes.add(READ, "/time-tracker/settings", module=MODULE)
async def settings(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": SETTINGS}


@routes.add(READ, "/time-tracker/buckets", module=MODULE)
async def buckets(req: RestRequest) -> dict[str, Any]:
    tasks = _tasks(req)
    ids = sorted({t["client_id"] for t in tasks})
    return {"success": 1, "total": len(ids), "data": [_bucket(i, tasks) for i in ids]}


@routes.add(READ, r"/time-tracker/buckets/(?P<id>\d+)", module=MODULE)
async def bucket(req: RestRequest) -> dict[str, Any]:
    client_id = int(req.path_params["id"])
    if client_id and client_id not in req.state.clients:
        raise RestError(req.code("rest_invalid_bucket_id"), "Invalid or not found bucket ID.", 404)
    return {"success": 1, "data": _bucket(client_id, _tasks(req))}


@routes.add(READ, "/time-tracker/clients", module=MODULE)
async def clients(req: RestRequest) -> dict[str, Any]:
    rows = [client_view(c, simple=True) for c in req.state.list_clients()]
    return {"success": 1, "total": len(rows), "data": rows}


@routes.add(READ, rf"/time-tracker/clients/{CLIENT}(?P<part>/buckets|/settings|/tasks)?", module=MODULE)
async def client_part(req: RestRequest) -> dict[str, Any]:
    client = client_or_404(req, req.path_params["id_email"])
    part = req.path_params.get("part")
    tasks = [t for t in _tasks(req) if t["client_id"] == client.id]
    if part == "/buckets":
        return {"success": 1, "data": [_bucket(client.id, tasks)]}
    if part == "/settings":
        return {"success": 1, "data": {**SETTINGS, "client_id": client.id}}
    if part == "/tasks":
        return {"success": 1, "total": len(tasks), "data": tasks}
    return {"success": 1, "data": client_view(client, simple=True)}


@routes.add(READ, rf"/time-tracker/sites/{SITE_ID_OR_DOMAIN}/tasks", module=MODULE)
async def site_tasks(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    tasks = [t for t in _tasks(req) if t["site_id"] == site.id]
    return {"success": 1, "total": len(tasks), "data": tasks}


@routes.add("POST", "/time-tracker/tasks/add", module=MODULE)
async def add_task(req: RestRequest) -> dict[str, Any]:
    title = req.text("title").strip()
    if not title:
        raise missing_params(["title"])
    site_id = req.integer("site_id", 0, minimum=0) or 0
    if site_id and site_id not in req.state.sites:
        raise RestError(req.code("rest_invalid_site_id"), "Invalid or not found site ID.", 404)
    client_id = req.integer("client_id", 0, minimum=0) or (req.state.sites[site_id].client_id if site_id else 0)
    task_id = max((t["id"] for t in _tasks(req)), default=0) + 1
    task = {
        "id": task_id,
        "title": title,
        "site_id": site_id,
        "client_id": client_id,
        "status": "stopped",
        "seconds": 0,
        "started_at": 0,
    }
    req.state.save_record(KIND, str(task_id), task)
    return {"success": 1, "data": task}


def _task(req: RestRequest) -> dict[str, Any]:
    task = req.state.records(KIND).get(req.path_params["id"])
    if task is None:
        raise RestError(req.code("rest_invalid_task_id"), "Invalid or not found task ID.", 404)
    return task


@routes.add(READ, r"/time-tracker/tasks/(?P<id>\d+)", module=MODULE)
async def get_task(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": _task(req)}


@routes.add(EDITABLE, r"/time-tracker/tasks/(?P<id>\d+)/(?P<action>edit|start|pause|stop)", module=MODULE)
async def change_task(req: RestRequest) -> dict[str, Any]:
    task = dict(_task(req))
    action = req.path_params["action"]
    now = req.state.now()
    if action == "edit":
        task["title"] = req.text("title", task["title"]).strip() or task["title"]
    elif action == "start" and task["status"] != "running":
        task["status"], task["started_at"] = "running", now
    elif action in ("pause", "stop") and task["status"] == "running":
        task["seconds"] += int(now - task["started_at"])
        task["status"] = "paused" if action == "pause" else "stopped"
    req.state.save_record(KIND, str(task["id"]), task)
    return {"success": 1, "data": task}
