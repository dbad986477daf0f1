"""Extension families (SSL monitor, domain monitor, Lighthouse, Pro Reports, Time Tracker): each is a
module; a module that is off has no routes, so its paths answer `rest_no_route`."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from emulator.records import Site
from emulator.rest import EDITABLE, READ, RestError, RestRequest, RestRoutes
from emulator.rest_v2.common import site_or_404
from emulator.rest_v2.shapes import site_simple

routes = RestRoutes()
SITE = r"(?P<id_domain>\d+|[A-Za-z0-9\-\.]*[A-Za-z0-9\-]{1,63}\.[A-Za-z]{2,6}(?::\d+)?)"


def _stable(site: Site, salt: str, modulo: int) -> int:
    return int(hashlib.sha256(f"{salt}:{site.id}".encode()).hexdigest(), 16) % modulo


def _ssl(site: Site) -> dict[str, Any]:
    days = 5 + _stable(site, "ssl", 360)
    return {
        "site_id": site.id,
        "url": site.url,
        "issuer": "R11",
        "valid": site.url.startswith("https"),
        "expiry_date": time.strftime("%Y-%m-%d", time.gmtime(time.time() + days * 86400)),
        "days_left": days,
    }


def _domain(site: Site) -> dict[str, Any]:
    days = 10 + _stable(site, "domain", 700)
    return {
        "site_id": site.id,
        "domain": site.domain,
        "registrar": "Example Registrar",
        "expiry_date": time.strftime("%Y-%m-%d", time.gmtime(time.time() + days * 86400)),
        "days_left": days,
    }


def _lighthouse(site: Site) -> dict[str, Any]:
    return {
        "site_id": site.id,
        "url": site.url,
        "performance": 40 + _stable(site, "perf", 60),
        "accessibility": 60 + _stable(site, "a11y", 40),
        "best_practices": 70 + _stable(site, "bp", 30),
        "seo": 70 + _stable(site, "seo", 30),
        "last_audit": "",
    }


@routes.add(READ, "/ssl-monitor/info", module="ssl-monitor")
async def ssl_all(req: RestRequest) -> dict[str, Any]:
    rows = [_ssl(s) for s in req.state.sites.values()]
    return {"success": 1, "total": len(rows), "data": rows}


@routes.add(READ, rf"/ssl-monitor/(?:info/)?{SITE}", module="ssl-monitor")
async def ssl_one(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    return {"success": 1, "data": _ssl(site), "site": site_simple(site)}


@routes.add(READ, "/domain-monitor/profiles", module="domain-monitor")
async def domain_all(req: RestRequest) -> dict[str, Any]:
    rows = [_domain(s) for s in req.state.sites.values()]
    return {"success": 1, "total": len(rows), "data": rows}


@routes.add(READ, rf"/domain-monitor/(?:profiles/)?{SITE}", module="domain-monitor")
async def domain_one(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    return {"success": 1, "data": _domain(site), "site": site_simple(site)}


@routes.add(READ, "/lighthouse/results", module="lighthouse")
async def lighthouse_all(req: RestRequest) -> dict[str, Any]:
    rows = [_lighthouse(s) for s in req.state.sites.values()]
    return {"success": 1, "total": len(rows), "data": rows}


@routes.add(READ, rf"/lighthouse/results/{SITE}", module="lighthouse")
async def lighthouse_one(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    return {"success": 1, "data": _lighthouse(site), "site": site_simple(site)}


@routes.add(EDITABLE, rf"/lighthouse/audit(?:/{SITE})?", module="lighthouse")
async def lighthouse_audit(req: RestRequest) -> dict[str, Any]:
    sites = [site_or_404(req)] if "id_domain" in req.path_params else list(req.state.sites.values())
    return {"success": 1, "message": "Lighthouse audit started.", "total": len(sites)}


@routes.add(READ, rf"/pro-reports/{SITE}/(?P<report>[a-zA-Z0-9\-_]+)", module="pro-reports")
async def pro_report(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    return {
        "success": 1,
        "data": {
            "report": req.path_params["report"],
            "site": site_simple(site),
            "updates_applied": 0,
            "uptime": 100,
            "generated_at": int(time.time()),
        },
        "site": site_simple(site),
    }


@routes.add(READ, "/time-tracker", module="time-tracker")
async def time_tracker(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": {"tasks": len(_tasks(req)), "buckets": 1}}


@routes.add(READ, r"/time-tracker/buckets(?:/(?P<id>\d+))?", module="time-tracker")
async def buckets(req: RestRequest) -> dict[str, Any]:
    bucket = {"id": 1, "name": "Maintenance", "tasks": list(_tasks(req).values())}
    if req.path_params.get("id") not in (None, "1"):
        raise RestError(req.code("rest_invalid_bucket_id"), "Invalid or not found bucket ID.", 404)
    return {"success": 1, "data": bucket if "id" in req.path_params else [bucket]}


def _tasks(req: RestRequest) -> dict[str, dict[str, Any]]:
    return req.state.records("time_tracker_tasks")


def _save_task(req: RestRequest, task: dict[str, Any]) -> None:
    req.state.save_record("time_tracker_tasks", str(task["id"]), task)


@routes.add("POST", "/time-tracker/tasks/add", module="time-tracker")
async def add_task(req: RestRequest) -> dict[str, Any]:
    title = req.text("title").strip()
    if not title:
        raise RestError("rest_missing_callback_param", "Missing parameter(s): title", 400, params=["title"])
    tasks = _tasks(req)
    task_id = str(max((int(k) for k in tasks), default=0) + 1)
    task = {"id": int(task_id), "title": title, "status": "stopped", "seconds": 0, "started_at": 0}
    _save_task(req, task)
    return {"success": 1, "data": task}


def _task(req: RestRequest) -> dict[str, Any]:
    task = _tasks(req).get(req.path_params["id"])
    if task is None:
        raise RestError(req.code("rest_invalid_task_id"), "Invalid or not found task ID.", 404)
    return task


@routes.add(READ, r"/time-tracker/tasks/(?P<id>\d+)", module="time-tracker")
async def get_task(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": _task(req)}


@routes.add(EDITABLE, r"/time-tracker/tasks/(?P<id>\d+)/(?P<action>edit|start|pause|stop)", module="time-tracker")
async def change_task(req: RestRequest) -> dict[str, Any]:
    task = _task(req)
    action = req.path_params["action"]
    now = time.time()
    if action == "edit":
        task["title"] = req.text("title", task["title"]) or task["title"]
    elif action == "start" and task["status"] != "running":
        task["status"], task["started_at"] = "running", now
    elif action in ("pause", "stop") and task["status"] == "running":
        task["seconds"] += int(now - task["started_at"])
        task["status"] = "paused" if action == "pause" else "stopped"
    _save_task(req, task)
    return {"success": 1, "data": task}
