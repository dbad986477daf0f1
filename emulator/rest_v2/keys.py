"""`/rest-api`: API keys. add-key reads a form body only, edit-key a JSON body only, as on the real one."""

from __future__ import annotations

from typing import Any

from emulator.auth import V2_PERMISSIONS, bearer_token, create_api_key, find_api_key
from emulator.records import ApiKey
from emulator.rest import READ, RestError, RestRequest, RestRoutes, invalid_param, missing_params
from emulator.rest_v2.shapes import key_view

routes = RestRoutes()
KEY_ID = r"(?P<key>[1-9][0-9]*|ck_[a-f0-9]{40})"


def _empty_body() -> RestError:
    return RestError("empty_body", "Request body is empty.", None)


def _permissions(req: RestRequest, value: Any) -> str:
    text = ",".join(sorted(p.strip() for p in str(value).split(",") if p.strip()))
    if text not in V2_PERMISSIONS:
        raise invalid_param("permissions", "Invalid method value.", "invalid_method")
    return V2_PERMISSIONS[text]


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


@routes.add(READ, "/rest-api/keys")
async def list_keys(req: RestRequest) -> dict[str, Any]:
    page = req.integer("page", 1, minimum=1) or 1
    per_page = req.integer("per_page", 20, minimum=1, maximum=200) or 20
    v1 = [
        {
            "id": k.ck_hash,
            "version": "v1",
            "description": k.description,
            "permissions": ["Read"] + (["Write &amp; Delete"] if "w" in k.perms.split(",") else []),
            "truncated_key": k.truncated_key,
            "active": k.enabled,
        }
        for k in req.state.v1_keys.values()
    ]
    v2 = [key_view(k) for k in sorted(req.state.api_keys.values(), key=lambda k: -k.key_id)]
    rows = v1 + v2
    start = (page - 1) * per_page
    return {
        "success": 1,
        "total": len(rows),
        "pages": max(1, -(-len(rows) // per_page)),
        "data": rows[start : start + per_page],
    }


@routes.add("POST", "/rest-api/add-key")
async def add_key(req: RestRequest) -> dict[str, Any]:
    form = req.form
    if "permissions" in req.params and "permissions" not in form and "active" not in form:
        raise _empty_body()  # a JSON body passes validation, then the handler finds no form fields
    missing = [name for name in ("active", "permissions") if name not in req.params]
    if missing:
        raise missing_params(missing)
    permissions = _permissions(req, req.params["permissions"])
    if not form:
        raise _empty_body()
    _, consumer_key, consumer_secret = create_api_key(
        req.state, str(form.get("description", "")), permissions, _truthy(form.get("active"))
    )
    return {
        "success": 1,
        "message": "API Key created successfully.",
        "token": bearer_token(consumer_key, consumer_secret),
    }


def _key_or_error(req: RestRequest) -> ApiKey:
    key = find_api_key(req.state, req.path_params["key"])
    if key is None:
        raise RestError("api_key_not_found", "API key not found.", None)
    return key


@routes.add("PUT,PATCH", rf"/rest-api/edit-key/{KEY_ID}")
async def edit_key(req: RestRequest) -> dict[str, Any]:
    body = req.json_body
    key = _key_or_error(req)
    if not isinstance(body, dict) or not body:
        raise _empty_body()
    if "permissions" in body:
        key.permissions = _permissions(req, body["permissions"])
    if "active" in body:
        key.enabled = _truthy(body["active"])
    if "description" in body:
        key.description = str(body["description"])
    req.state.save_api_key(key)
    return {"success": 1, "message": "API Key updated successfully."}


@routes.add("DELETE", rf"/rest-api/delete-key/{KEY_ID}")
async def delete_key(req: RestRequest) -> dict[str, Any]:
    req.state.delete_api_key(_key_or_error(req))
    return {"success": 1, "message": "API Key deleted successfully."}
