"""`/monitors`: uptime monitors (one per site), heartbeats, incidents, checks and settings."""

from __future__ import annotations

import re
import time
from typing import Any

from emulator.records import Heartbeat, Monitor, Site
from emulator.rest import READ, RestError, RestRequest, RestRoutes, invalid_param
from emulator.rest_v2.common import SITE_ID_OR_DOMAIN, paged
from emulator.rest_v2.shapes import heartbeat_view, monitor_view

routes = RestRoutes()
STATUS_CODES = {"down": 0, "up": 1, "pending": 2, "first": 3}
PERIODS = {"24h": 86400, "7d": 7 * 86400, "30d": 30 * 86400}
NOT_FOUND = {"success": 0, "message": "Monitor not found."}


def _monitored(req: RestRequest) -> list[Site]:
    sites = [s for s in req.state.sites.values() if s.monitor is not None]
    include, exclude = req.id_list("include"), req.id_list("exclude")
    if include:
        sites = [s for s in sites if s.monitor and s.monitor.id in set(include)]
    if exclude:
        sites = [s for s in sites if s.monitor and s.monitor.id not in set(exclude)]
    status = req.get("status")
    if status:
        if status not in (*STATUS_CODES, "paused"):
            raise invalid_param("status", "status is not one of up, down, pending, first, paused.", "rest_not_in_enum")
        sites = [
            s
            for s in sites
            if s.monitor and (s.monitor.last_status == status or (status == "paused" and not s.monitor.active))
        ]
    search = req.optional_text("search")
    if search:
        needle = search.lower()
        sites = [s for s in sites if needle in s.url.lower() or needle in s.name.lower()]
    return sites


def _find(req: RestRequest) -> tuple[Site, Monitor] | None:
    value = req.path_params["id_domain"]
    if value.isdigit():
        site = next((s for s in req.state.sites.values() if s.monitor and s.monitor.id == int(value)), None)
    else:
        site = req.state.find_site(value)
    if site is None or site.monitor is None:
        return None
    return site, site.monitor


@routes.add(READ, "/monitors")
async def list_monitors(req: RestRequest) -> dict[str, Any]:
    sites = _monitored(req)
    now = req.state.now()
    page = paged(req, sites, default_per_page=20)
    return {"success": 1, "total": len(sites), "data": [monitor_view(s, s.monitor, now) for s in page if s.monitor]}


@routes.add(READ, "/monitors/basic")
async def list_basic(req: RestRequest) -> dict[str, Any]:
    sites = _monitored(req)
    return {
        "success": 1,
        "total": len(sites),
        "data": [
            {"id": str(s.monitor.id), "url": s.url, "last_status": s.monitor.last_status}
            for s in paged(req, sites, default_per_page=20)
            if s.monitor
        ],
    }


@routes.add(READ, "/monitors/count")
async def count(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "count": len(_monitored(req))}


@routes.add(READ, rf"/monitors/{SITE_ID_OR_DOMAIN}")
async def get_monitor(req: RestRequest) -> dict[str, Any]:
    found = _find(req)
    if found is None:
        return NOT_FOUND
    return {"success": 1, "data": monitor_view(found[0], found[1], req.state.now(), with_name=True)}


@routes.add(READ, rf"/monitors/{SITE_ID_OR_DOMAIN}/basic")
async def get_basic(req: RestRequest) -> dict[str, Any]:
    found = _find(req)
    if found is None:
        return NOT_FOUND
    return {"success": 1, "data": {"id": str(found[1].id), "url": found[0].url, "last_status": ""}}


ISO_RANGE = re.compile(r"^\d{4}-\d{2}-\d{2}(T[\d:]+Z?)?/\d{4}-\d{2}-\d{2}(T[\d:]+Z?)?$")


@routes.add(READ, rf"/monitors/{SITE_ID_OR_DOMAIN}/heartbeat")
async def heartbeats(req: RestRequest) -> dict[str, Any]:
    found = _find(req)
    if found is None:
        return NOT_FOUND
    period = req.optional_text("period") or "30d"
    if period not in PERIODS and not ISO_RANGE.match(str(period)):
        message = "Invalid period format. Allowed values: 24h, 7d, 30d or ISO8601 range (start/end)"
        raise invalid_param("period", message, "invalid_period")
    beats = sorted(found[1].heartbeats, key=lambda b: -b.time)
    if period in PERIODS:
        since = req.state.now() - PERIODS[period]
        beats = [b for b in beats if b.time >= since]
    status = req.optional_text("status")
    if status:
        if status not in STATUS_CODES:
            raise invalid_param("status", "status is not one of up, down, pending, first.", "rest_not_in_enum")
        beats = [b for b in beats if b.status == STATUS_CODES[status]]
    if not beats:
        return {"success": 0, "message": "No heartbeats found."}
    limit = req.integer("limit", 0, minimum=0) or 0
    page = req.integer("page", 1, minimum=1) or 1
    shown = beats[(page - 1) * limit : page * limit] if limit else beats
    return {
        "success": 1,
        "data": [heartbeat_view(found[1].id, b) for b in shown],
        "meta": {
            "page": page,
            "per_page": limit,
            "total": len(beats),
            "total_pages": -(-len(beats) // limit) if limit else 1,
        },
    }


def incidents(monitor: Monitor, now: float) -> list[dict[str, Any]]:
    """Down streams of heartbeats: started at the first down beat, ended at the next up beat."""
    result, start, downs = [], None, 0
    for beat in sorted(monitor.heartbeats, key=lambda b: b.time):
        if beat.status == 0:
            start = beat.time if start is None else start
            downs += 1
        elif beat.status == 1 and start is not None:
            result.append(
                {
                    "started_at": _z(start),
                    "ended_at": _z(beat.time),
                    "duration_sec": int(beat.time - start),
                    "resolved": True,
                    "down_count": downs,
                }
            )
            start, downs = None, 0
    if start is not None:
        result.append(
            {
                "started_at": _z(start),
                "ended_at": "",
                "duration_sec": int(now - start),
                "resolved": False,
                "down_count": downs,
            }
        )
    return result


def _z(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


@routes.add(READ, rf"/monitors/{SITE_ID_OR_DOMAIN}/incidents")
async def list_incidents(req: RestRequest) -> dict[str, Any]:
    found = _find(req)
    if found is None:
        return NOT_FOUND
    return {"success": 1, "data": paged(req, incidents(found[1], req.state.now()))}


@routes.add(READ, rf"/monitors/{SITE_ID_OR_DOMAIN}/incidents/count")
async def count_incidents(req: RestRequest) -> dict[str, Any]:
    found = _find(req)
    return NOT_FOUND if found is None else {"success": 1, "count": len(incidents(found[1], req.state.now()))}


@routes.add("POST", rf"/monitors/{SITE_ID_OR_DOMAIN}/check")
async def check_monitor(req: RestRequest) -> dict[str, Any]:
    found = _find(req)
    if found is None:
        return NOT_FOUND
    site, monitor = found
    result = await req.ops.check(site)
    status = 1 if result.online else 0
    now = req.state.now()
    next_id = (
        max((h.heartbeat_id for s in req.state.sites.values() if s.monitor for h in s.monitor.heartbeats), default=0)
        + 1
    )
    monitor.heartbeats.append(
        Heartbeat(
            next_id,
            status,
            f"{result.http_code} - {'up' if status else 'down'}!",
            1,
            now,
            result.response_ms,
            result.http_code,
        )
    )
    monitor.heartbeats = monitor.heartbeats[-200:]
    monitor.last_status, monitor.last_check_at, monitor.last_status_code = (
        ("up" if status else "down"),
        now,
        result.http_code,
    )
    req.state.save_site(site)
    return {"success": 1, "data": {"http_code": result.http_code, "uptime_status": monitor.last_status}}


SETTINGS = {
    "active": ("0", "1", "useglobal"),
    "type": ("useglobal", "http", "ping", "keyword"),
    "method": ("useglobal", "head", "get", "post", "push", "patch", "delete"),
}


def _settings_body(req: RestRequest) -> dict[str, Any]:
    if req.content_type.split(";")[0].strip().lower() != "application/json":
        raise RestError("invalid_content_type", "Content-Type must be application/json.", None)
    body = req.json_body
    if not isinstance(body, dict) or not body:
        raise RestError("empty_body", "Request body is empty.", None)
    for name, allowed in SETTINGS.items():
        if name in body and str(body[name]) not in allowed:
            raise invalid_param(name, f"{name} is not one of {', '.join(allowed)}.", "rest_not_in_enum")
    for name in ("maxretries", "timeout", "interval"):
        if name in body and not str(body[name]).isdigit():
            raise invalid_param(name, f"{name} is not of type integer.", "rest_invalid_type")
    return body


def _apply_settings(monitor: Monitor, body: dict[str, Any]) -> None:
    for name in ("type", "method", "keyword", "expected_status"):
        if name in body:
            setattr(monitor, name, str(body[name]))
    for name in ("maxretries", "timeout", "interval"):
        if name in body:
            setattr(monitor, name, int(body[name]))
    if "active" in body and str(body["active"]).isdigit():
        monitor.active = int(body["active"])


@routes.add("PUT,PATCH", rf"/monitors/{SITE_ID_OR_DOMAIN}/settings")
async def monitor_settings(req: RestRequest) -> dict[str, Any]:
    found = _find(req)
    if found is None:
        return NOT_FOUND
    body = _settings_body(req)
    _apply_settings(found[1], body)
    req.state.save_site(found[0])
    return {"success": 1, "data": {"monitor_id": found[1].id, **{k: body[k] for k in body}}}


@routes.add("PUT,PATCH", "/monitors/settings")
async def global_settings(req: RestRequest) -> dict[str, Any]:
    body = _settings_body(req)
    settings = req.state.settings["monitoring"]
    for name, value in body.items():
        settings[req.code(f"uptime_monitoring_{name}")] = value
    req.state.save_settings("monitoring")
    return {"success": 1, "data": body}
