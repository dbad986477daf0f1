"""`/clients`: CRUD (by id or e-mail), custom fields, suspension, sites and costs of a client."""

from __future__ import annotations

from typing import Any

from emulator.records import Client, ClientField
from emulator.rest import EDITABLE, READ, RestError, RestRequest, RestRoutes, missing_params
from emulator.rest_v2.common import paged
from emulator.rest_v2.shapes import CLIENT_SOCIAL, client_view, cost_view, site_view

routes = RestRoutes()
ID = r"(?P<id_email>(?!fields$)[a-zA-Z0-9\_\-\.\@\%\+]+)"
STATUS = {"active": 0, "suspended": 1, "lead": 2, "lost": 3}
EDITABLE_FIELDS = (
    "name",
    "client_email",
    "client_phone",
    "address_1",
    "address_2",
    "city",
    "zip",
    "state",
    "country",
    "note",
    *CLIENT_SOCIAL,
)


def client_or_404(req: RestRequest, value: Any) -> Client:
    client = req.state.find_client(str(value))
    if client is None:
        code = "rest_invalid_client_id" if str(value).isdigit() else "rest_invalid_client_data"
        raise RestError(req.code(code), "Invalid or not found client.", 404)
    return client


def _fields(data: dict[str, Any]) -> dict[str, str]:
    return {k: str(data[k]) for k in EDITABLE_FIELDS if k in data and data[k] is not None}


def create_client_from(req: RestRequest, data: dict[str, Any]) -> dict[str, Any]:
    fields = _fields(data)
    name = fields.pop("name", "").strip()
    if not name:
        return {"success": 0, "error": "Client name is required."}
    client = req.state.add_client(name, **fields)
    selected = [int(s) for s in str(data.get("selected_sites") or "").split(",") if s.strip().isdigit()]
    req.state.assign_sites_to_client(client, selected)
    return {
        "success": 1,
        "message": "Client created Successfully.",
        "data": {**client_view(client, simple=True), "selected_sites": ",".join(map(str, selected))},
    }


def edit_client_from(req: RestRequest, client: Client, data: dict[str, Any]) -> dict[str, Any]:
    fields = _fields(data)
    if "name" in fields and not fields["name"].strip():
        return {"success": 0, "error": "Client name is required."}
    req.state.edit_client(client, **fields)
    if data.get("selected_sites") is not None:
        selected = [int(s) for s in str(data["selected_sites"]).split(",") if s.strip().isdigit()]
        req.state.assign_sites_to_client(client, selected)
    return {"success": 1, "message": "Client updated Successfully.", "data": client_view(client, simple=True)}


def delete_client_for(req: RestRequest, client: Client) -> dict[str, Any]:
    req.state.delete_client(client)
    return {"success": 1, "message": "Client deleted successfully", "data": client_view(client, simple=True)}


@routes.add(READ, "/clients")
async def list_clients(req: RestRequest) -> dict[str, Any]:
    statuses = None
    if req.get("status"):
        wanted = req.str_list("status") or []
        unknown = [s for s in wanted if s not in STATUS]
        if unknown:
            raise RestError(req.code("rest_invalid_param"), "The status argument should be: " + ",".join(STATUS), 400)
        statuses = [STATUS[s] for s in wanted]
    clients = req.state.list_clients(
        req.optional_text("search"), req.id_list("include"), req.id_list("exclude"), statuses
    )
    return {"success": 1, "total": len(clients), "data": [client_view(c) for c in paged(req, clients)]}


@routes.add(READ, "/clients/count")
async def count_clients(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "total": str(len(req.state.clients))}


@routes.add("POST", "/clients/add")
async def add_client(req: RestRequest) -> dict[str, Any]:
    return create_client_from(req, req.params)


@routes.add(READ, r"/clients/fields")
async def list_fields(req: RestRequest) -> dict[str, Any]:
    rows = [
        {"field_id": str(f.field_id), "name": f.name, "description": f.description}
        for f in req.state.client_fields.values()
    ]
    per_page = req.integer("per_page", 20, minimum=1, maximum=200) or 20
    return {
        "success": 1,
        "total": len(rows),
        "pages": max(1, -(-len(rows) // per_page)),
        "data": paged(req, rows, default_per_page=20),
    }


@routes.add("POST", r"/clients/fields/add")
async def add_field(req: RestRequest) -> dict[str, Any]:
    missing = [n for n in ("name", "description") if not req.form.get(n)]
    if missing:
        raise missing_params(missing)
    client_field = ClientField(
        req.state.next_id("client_field", req.state.client_fields), req.form["name"], req.form["description"]
    )
    req.state.save_client_field(client_field)
    return _field_answer("Field created successfully.", client_field)


def _field_answer(message: str, client_field: ClientField) -> dict[str, Any]:
    data = {"field_id": str(client_field.field_id), "name": client_field.name, "description": client_field.description}
    return {"success": 1, "message": message, "data": data}


def _field(req: RestRequest) -> ClientField:
    key = req.path_params["id_name"]
    found = next((f for f in req.state.client_fields.values() if str(f.field_id) == key or f.name == key), None)
    if found is None:
        raise RestError("invalid_field_id", "Invalid field ID or name.", None)
    return found


@routes.add("PUT,PATCH", r"/clients/fields/(?P<id_name>[^/]+)/edit")
async def edit_field(req: RestRequest) -> dict[str, Any]:
    client_field = _field(req)
    body = req.json_body if isinstance(req.json_body, dict) else {}
    if not body:
        raise RestError("empty_body", "Request body is empty.", None)
    client_field.name = str(body.get("name", client_field.name))
    client_field.description = str(body.get("description", client_field.description))
    req.state.save_client_field(client_field)
    return _field_answer("Field updated successfully.", client_field)


@routes.add("DELETE", r"/clients/fields/(?P<id_name>[^/]+)/delete")
async def delete_field(req: RestRequest) -> dict[str, Any]:
    client_field = _field(req)
    req.state.delete_client_field(client_field)
    return {"success": 1, "message": "Field deleted successfully."}


@routes.add(READ, rf"/clients/{ID}")
async def get_client(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "data": client_view(client_or_404(req, req.path_params["id_email"]), simple=True)}


@routes.add(EDITABLE, rf"/clients/{ID}/edit")
async def edit_client(req: RestRequest) -> dict[str, Any]:
    return edit_client_from(req, client_or_404(req, req.path_params["id_email"]), req.params)


@routes.add("DELETE", rf"/clients/{ID}/remove")
async def remove_client(req: RestRequest) -> dict[str, Any]:
    return delete_client_for(req, client_or_404(req, req.path_params["id_email"]))


@routes.add(READ, rf"/clients/{ID}/sites")
async def client_sites(req: RestRequest) -> dict[str, Any]:
    sites = req.state.client_sites(client_or_404(req, req.path_params["id_email"]))
    return {
        "success": 1,
        "total": len(sites),
        "data": [site_view(req.state, s, empty_tags=[]) for s in paged(req, sites)],
    }


@routes.add(READ, rf"/clients/{ID}/sites/count")
async def client_sites_count(req: RestRequest) -> dict[str, Any]:
    return {"success": 1, "total": len(req.state.client_sites(client_or_404(req, req.path_params["id_email"])))}


@routes.add(READ, rf"/clients/{ID}/costs", module="cost-tracker")
async def client_costs(req: RestRequest) -> dict[str, Any]:
    costs = req.state.client_costs(client_or_404(req, req.path_params["id_email"]))
    if not costs:
        return {"success": 1, "message": "Costs not found."}
    return {"success": 1, "total": len(costs), "data": {str(c.id): cost_view(c) for c in costs}}


async def _suspension(req: RestRequest, value: int, message: str) -> dict[str, Any]:
    client = client_or_404(req, req.path_params["id_email"])
    req.state.edit_client(client, suspended=value)
    return {"success": 1, "message": message, "data": client_view(client, simple=True)}


@routes.add(EDITABLE, rf"/clients/{ID}/suspend")
async def suspend_client(req: RestRequest) -> dict[str, Any]:
    return await _suspension(req, 1, "Client suspended successfully.")


@routes.add(EDITABLE, rf"/clients/{ID}/unsuspend")
async def unsuspend_client(req: RestRequest) -> dict[str, Any]:
    return await _suspension(req, 0, "Client unsuspended successfully.")
