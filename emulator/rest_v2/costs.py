"""`/costs` (the Cost Tracker module): CRUD, sites and clients of a cost."""

from __future__ import annotations

from typing import Any

from emulator.records import Cost
from emulator.rest import EDITABLE, READ, RestError, RestRequest, RestRoutes
from emulator.rest_v2.common import sites_by_ids
from emulator.rest_v2.shapes import client_view, cost_view, site_view

routes = RestRoutes()
MODULE = "cost-tracker"
TYPES = ("subscription", "lifetime")
STATUSES = ("active", "canceled", "onhold", "expired", "pending_cancelation")
RENEWALS = ("weekly", "monthly", "quarterly", "yearly")


def cost_or_404(req: RestRequest, value: Any) -> Cost:
    cost = req.state.costs.get(int(value)) if str(value).isdigit() else None
    if cost is None:
        raise RestError(req.code("rest_invalid_costs_id"), "Invalid or not found cost ID.", 404)
    return cost


def _ids(value: Any) -> list[int]:
    items = value if isinstance(value, list) else str(value or "").split(",")
    return [int(v) for v in items if str(v).strip().isdigit()]


def _fields(req: RestRequest, data: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for source, target, allowed in (
        ("payment_type", "type", TYPES),
        ("cost_tracker_status", "cost_status", STATUSES),
        ("renewal_type", "renewal_type", RENEWALS),
    ):
        if source in data:
            if data[source] not in allowed:
                raise RestError("rest_invalid_param", f"{source} must be one of {', '.join(allowed)}.", 400)
            fields[target] = data[source]
    for source, target in (
        ("url", "url"),
        ("product_type", "product_type"),
        ("product_slug", "slug"),
        ("license_type", "license_type"),
        ("payment_method", "payment_method"),
        ("note", "note"),
    ):
        if source in data:
            fields[target] = str(data[source])
    if "price" in data:
        try:
            fields["price"] = float(data["price"])
        except (TypeError, ValueError):
            raise RestError("rest_invalid_param", "price must be a number.", 400) from None
    for key in ("sites", "groups", "clients"):
        if key in data:
            fields[key] = _ids(data[key])
    return fields


def create_cost_from(req: RestRequest, data: dict[str, Any]) -> dict[str, Any]:
    fields = _fields(req, data)
    if not any(fields.get(k) for k in ("sites", "groups", "clients")):
        raise RestError(req.code("rest_create_costs_invalid_data"), "Please select sites, tags or clients.", 400)
    name = str(data.get("name") or "").strip()
    if not name:
        raise RestError(req.code("rest_create_costs_invalid_data"), "The name is required.", 400)
    cost = req.state.add_cost(name, last_renewal=req.state.now(), **fields)
    return {"success": 1, "data": cost_view(cost)}


def edit_cost_from(req: RestRequest, cost: Cost, data: dict[str, Any]) -> dict[str, Any]:
    fields = _fields(req, data)
    if data.get("name"):
        fields["name"] = str(data["name"])
    req.state.edit_cost(cost, **fields)
    return {"success": 1, "data": cost_view(cost)}


def delete_cost_for(req: RestRequest, cost: Cost) -> dict[str, Any]:
    req.state.delete_cost(cost)
    return {"success": 1, "message": "Cost deleted successfully.", "data": cost_view(cost)}


@routes.add(READ, "/costs", module=MODULE)
async def list_costs(req: RestRequest) -> dict[str, Any]:
    costs = list(req.state.costs.values())
    if req.get("type") not in (None, "", "any"):
        costs = [c for c in costs if c.type == req.get("type")]
    if req.get("status") not in (None, "", "any"):
        costs = [c for c in costs if c.cost_status == req.get("status")]
    if req.get("category") not in (None, "", "any"):
        costs = [c for c in costs if c.product_type == req.get("category")]
    return {"success": 1, "total": len(costs), "data": {str(c.id): cost_view(c) for c in costs} or []}


@routes.add(EDITABLE, "/costs/add", module=MODULE)
async def add_cost(req: RestRequest) -> dict[str, Any]:
    return create_cost_from(req, req.params)


@routes.add(READ, r"/costs/(?P<id>\d+)", module=MODULE)
async def get_cost(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": cost_view(cost_or_404(req, req.path_params["id"]))}


@routes.add(EDITABLE, r"/costs/(?P<id>\d+)/edit", module=MODULE)
async def edit_cost(req: RestRequest) -> dict[str, Any]:
    return edit_cost_from(req, cost_or_404(req, req.path_params["id"]), req.params)


@routes.add("DELETE", r"/costs/(?P<id>\d+)/remove", module=MODULE)
async def remove_cost(req: RestRequest) -> dict[str, Any]:
    return delete_cost_for(req, cost_or_404(req, req.path_params["id"]))


@routes.add(READ, r"/costs/(?P<id>\d+)/sites", module=MODULE)
async def cost_sites(req: RestRequest) -> dict[str, Any]:
    cost = cost_or_404(req, req.path_params["id"])
    sites = sites_by_ids(req, cost.sites)
    return {"success": 1, "total": len(sites), "data": [site_view(req.state, s) for s in sites]}


@routes.add(READ, r"/costs/(?P<id>\d+)/clients", module=MODULE)
async def cost_clients(req: RestRequest) -> dict[str, Any]:
    cost = cost_or_404(req, req.path_params["id"])
    clients = [req.state.clients[i] for i in cost.clients if i in req.state.clients]
    return {"success": 1, "total": len(clients), "data": [client_view(c) for c in clients]}
