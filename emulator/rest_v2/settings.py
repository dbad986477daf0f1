"""`/settings`: every category (read, edit), cost-tracker lists, and the asynchronous tools with their status
(both the spec's `/tools/{action}/status` and the dashboard's `/tools/{action}-status/{id}`)."""

from __future__ import annotations

import secrets
from typing import Any

from emulator.rest import READ, RestError, RestRequest, RestRoutes, invalid_param

routes = RestRoutes()
CATEGORIES = ("general", "advanced", "monitoring", "cost-tracker", "dashboard-insights", "tools")
TOOLS = {"destroy-sessions": "destroy", "renew-connections": "renew", "disconnect-all-sites": "disconnect"}
TOOL_ALIASES = {"disconnect-sites": "disconnect-all-sites"}
TOOL_ERRORS = {
    "destroy-sessions": ("destroy_sessions_job_not_found", "Destroy sessions job not found."),
    "renew-connections": ("renew_connection_job_not_found", "Renew connection job not found."),
    "disconnect-all-sites": ("disconnect_all_sites_job_not_found", "Disconnect all sites job not found."),
}


def _json_object(req: RestRequest) -> dict[str, Any]:
    if req.content_type.split(";")[0].strip().lower() != "application/json":
        raise RestError("invalid_content_type", "Content-Type must be application/json.", None)
    if not isinstance(req.json_body, dict) or not req.json_body:
        raise RestError("empty_body", "Request body is empty.", None)
    return req.json_body


def _apply(req: RestRequest, current: dict[str, Any], changes: dict[str, Any]) -> None:
    """Known keys only, with the type of the current value (ints accept numeric strings)."""
    for name, value in changes.items():
        if name not in current:
            continue
        old = current[name]
        if isinstance(old, bool):
            if not isinstance(value, bool | int) and str(value).lower() not in ("0", "1", "true", "false"):
                raise invalid_param(name, f"{name} is not of type boolean.", "rest_invalid_type")
            value = value if isinstance(value, bool) else str(value).lower() in ("1", "true")
        elif isinstance(old, int):
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise invalid_param(name, f"{name} is not of type integer.", "rest_invalid_type") from None
        elif isinstance(old, str) and not isinstance(value, str | int | float):
            raise invalid_param(name, f"{name} is not of type string.", "rest_invalid_type")
        elif isinstance(old, list | dict) and not isinstance(value, type(old)):
            raise invalid_param(name, f"{name} is not of type {type(old).__name__}.", "rest_invalid_type")
        current[name] = value if not isinstance(old, str) else str(value)


@routes.add(READ, r"/settings/(?P<category>general|advanced|monitoring|cost-tracker|dashboard-insights|tools)")
async def read_category(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": req.state.settings[req.path_params["category"]]}


@routes.add(
    "PUT,PATCH", r"/settings/(?P<category>general|advanced|monitoring|cost-tracker|dashboard-insights|tools)/edit"
)
async def edit_category(req: RestRequest) -> dict[str, Any]:
    category = req.path_params["category"]
    changes = _json_object(req)
    _apply(req, req.state.settings[category], changes)
    req.state.save_settings(category)
    if category == "advanced":  # the dashboard-wide limits are options of the same screen
        for name, value in changes.items():
            if name in req.state.options and name != "last_time_start_batch_updates":
                try:
                    req.state.set_option(name, int(value))
                except (TypeError, ValueError):
                    raise invalid_param(name, f"{name} is not of type integer.", "rest_invalid_type") from None
    return {"success": 1, "message": "Settings updated successfully.", "data": req.state.settings[category]}


def _sub(req: RestRequest, category: str, key: str) -> dict[str, Any]:
    values = req.state.settings[category]
    if key not in values:
        raise invalid_param(key, f"{key} is not one of {', '.join(values)}.", "rest_not_in_enum")
    return values[key]


@routes.add(READ, r"/settings/(?P<category>emails|api-backups)")
async def read_group(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": req.state.settings[req.path_params["category"]]}


@routes.add(READ, r"/settings/(?P<category>emails|api-backups)/(?P<key>[a-zA-Z0-9\-\._]+)")
async def read_group_item(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": _sub(req, req.path_params["category"], req.path_params["key"])}


@routes.add("PUT,PATCH", r"/settings/(?P<category>emails|api-backups)/(?P<key>[a-zA-Z0-9\-\._]+)/edit")
async def edit_group_item(req: RestRequest) -> dict[str, Any]:
    category, key = req.path_params["category"], req.path_params["key"]
    values = _sub(req, category, key)
    changes = _json_object(req)
    if category == "api-backups":  # credentials are write-only: remember that they are set, never echo them
        values["api_key_set"] = bool(changes.get("password") or changes.get("username") or values.get("api_key_set"))
        changes = {k: v for k, v in changes.items() if k not in ("password", "username", "secrets")}
        values.update({k: v for k, v in changes.items() if k in ("enabled", "account_email", "url")})
    else:
        _apply(req, values, changes)
    req.state.save_settings(category)
    return {"success": 1, "message": "Settings updated successfully.", "data": values}


@routes.add("POST", r"/settings/cost-tracker/(?P<list>product-types|payment-methods)/add")
async def add_cost_list_entry(req: RestRequest) -> dict[str, Any]:
    title = req.text("title").strip()
    if not title:
        raise RestError("empty_name", "The title is required.", None)
    key = req.path_params["list"].replace("-", "_")
    slug = "-".join(title.lower().split())
    entries = req.state.settings["cost-tracker"].setdefault(key, {})
    entries[slug] = {
        "title": title,
        **({"color": req.text("color"), "icon": req.text("icon")} if key == "product_types" else {}),
    }
    req.state.save_settings("cost-tracker")
    return {"success": 1, "data": {"slug": slug, **entries[slug]}}


@routes.add(
    "PUT,PATCH,DELETE",
    r"/settings/cost-tracker/(?P<list>product-types|payment-methods)/(?P<slug>[a-zA-Z0-9\-\._]+)/(?P<action>edit|delete)",
)
async def change_cost_list_entry(req: RestRequest) -> dict[str, Any]:
    key = req.path_params["list"].replace("-", "_")
    slug, action = req.path_params["slug"], req.path_params["action"]
    if (action == "delete") != (req.method == "DELETE"):
        raise RestError("rest_no_route", "No route was found matching the URL and request method.", 404)
    entries = req.state.settings["cost-tracker"].setdefault(key, {})
    if slug not in entries:
        raise RestError("invalid_field_id", "Entry not found.", None)
    if action == "delete":
        removed = entries.pop(slug)
        req.state.save_settings("cost-tracker")
        return {"success": 1, "data": {"slug": slug, **removed}}
    for field_name in ("title", "color", "icon"):
        if req.has(field_name):
            entries[slug][field_name] = req.text(field_name)
    req.state.save_settings("cost-tracker")
    return {"success": 1, "data": {"slug": slug, **entries[slug]}}


def _uniqid(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(7)}.{secrets.randbelow(10**8):08d}"


@routes.add(
    "POST", r"/settings/tools/(?P<tool>destroy-sessions|renew-connections|disconnect-all-sites|disconnect-sites)"
)
async def start_tool(req: RestRequest) -> dict[str, Any]:
    tool = TOOL_ALIASES.get(req.path_params["tool"], req.path_params["tool"])
    prefix = TOOLS[tool]
    job_id = _uniqid(prefix)
    sites = list(req.state.sites.values())
    errors: list[dict[str, Any]] = []
    if tool == "renew-connections":
        for site in sites:
            if not await req.ops.reconnect(site):
                errors.append({"site_id": site.id, "message": "The site cannot be reached."})
    elif tool == "disconnect-all-sites":
        for site in sites:
            await req.ops.disconnect(site, mark_local=True)
    req.state.save_tool_job(
        job_id,
        {
            "tool": tool,
            "total": len(sites),
            "processed": len(sites),
            "failed": len(errors),
            "errors": errors,
            "completed_at": int(req.state.now()),
        },
    )
    base = req.emulator.base_url.rstrip("/")
    message = {
        "renew-connections": "Renew connection process started in background.",
        "destroy-sessions": "Destroy sessions process started in background.",
        "disconnect-all-sites": "Disconnect all sites process started in background.",
    }[tool]
    return {
        "success": 1,
        "message": message,
        f"{prefix}_id": job_id,
        "status_url": f"{base}/{req.ns}/v2/settings/tools/{tool}-status/{job_id}",
    }


def _tool_status(req: RestRequest, tool: str, job_id: str | None) -> dict[str, Any]:
    tool = TOOL_ALIASES.get(tool, tool)
    jobs = {k: v for k, v in req.state.tool_jobs.items() if v.get("tool") == tool}
    if job_id is None and jobs:
        job_id = max(jobs, key=lambda k: jobs[k]["completed_at"])
    job = jobs.get(job_id or "")
    if job is None:
        code, message = TOOL_ERRORS[tool]
        raise RestError(code, message, None)
    return {
        "success": True,
        "status": "completed",
        "total": job["total"],
        "processed": job["processed"],
        "failed": job["failed"],
        "progress": 100,
        "errors": job["errors"],
        "started_at": "",
        "completed_at": job["completed_at"],
    }


@routes.add(
    READ,
    r"/settings/tools/(?P<tool>destroy-sessions|renew-connections|disconnect-all-sites)-status/(?P<job>[a-zA-Z0-9_.\-]+)",
)
async def tool_status_by_id(req: RestRequest) -> dict[str, Any]:
    return _tool_status(req, req.path_params["tool"], req.path_params["job"])


@routes.add(
    READ, r"/settings/tools/(?P<tool>destroy-sessions|renew-connections|disconnect-all-sites|disconnect-sites)/status"
)
async def tool_status_latest(req: RestRequest) -> dict[str, Any]:
    return _tool_status(req, req.path_params["tool"], req.optional_text("id"))


@routes.add("POST", r"/settings/tools/(?P<tool>clear-activation-data|restore-info-messages)")
async def simple_tool(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "message": "Done."}
