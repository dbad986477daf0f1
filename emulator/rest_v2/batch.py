"""The global `/batch` and the controller batch routes (`/sites/batch`, `/tags/batch`, `/clients/batch`,
`/costs/batch`): each item answers as its single route would, or `{id, error}`; more items than
`<ns>_rest_batch_items_limit` is a 413."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from emulator.rest import EDITABLE, RestError, RestRequest, RestRoutes
from emulator.rest_v2 import clients, costs, sites, tags
from emulator.rest_v2.common import sync_through_ability
from emulator.rest_v2.shapes import site_simple, site_view

routes = RestRoutes()
SITE_ACTIONS = (
    "sync",
    "reconnect",
    "disconnect",
    "suspend",
    "unsuspend",
    "check",
    "remove",
    "security",
    "plugins",
    "themes",
)
ItemRunner = Callable[[RestRequest, Any], Any]  # an answer, or an awaitable of one
Controller = Callable[[RestRequest, dict[str, Any]], Awaitable[dict[str, Any]]]


def _count(body: dict[str, Any]) -> int:
    return sum(len(v) for v in body.values() if isinstance(v, list))


def _check_limit(req: RestRequest, count: int) -> None:
    limit = int(req.state.option("rest_batch_items_limit") or 100)
    if count > limit:
        raise RestError(
            req.code("rest_request_entity_too_large"),
            f"Unable to accept more than {limit} items for this request.",
            413,
        )


def _item_error(item_id: Any, error: RestError) -> dict[str, Any]:
    return {
        "id": item_id,
        "error": {
            "code": error.code,
            "message": error.message,
            "data": None if error.status is None else {"status": error.status},
        },
    }


async def _run(req: RestRequest, items: Any, runner: ItemRunner) -> list[Any]:
    if not isinstance(items, list):
        raise RestError("rest_invalid_param", "Batch actions must be arrays.", 400)
    answers = []
    for item in items:
        try:
            answer = runner(req, item)
            answers.append(await answer if inspect.isawaitable(answer) else answer)
        except RestError as error:
            item_id = item.get("id") if isinstance(item, dict) else item
            answers.append(_item_error(item_id, error))
    return answers


def _site(req: RestRequest, item: Any) -> Any:
    site_id = item.get("id") if isinstance(item, dict) else item
    site = req.state.find_site(str(site_id))
    if site is None:
        raise RestError(req.code("rest_invalid_site_id"), "Invalid or not found site ID.", 404)
    return site


async def _site_action(req: RestRequest, action: str, item: Any) -> Any:
    site = _site(req, item)
    if action == "sync":
        ok = await sync_through_ability(req, site)  # the batch runs the sync route's handler
        return {"success": 1, "data": site_view(req.state, site)} if ok else {"success": 0, "data": []}
    if action == "check":
        return await sites.check_one(req, site)
    if action == "reconnect":
        return {"success": int(await req.ops.reconnect(site)), "data": site_simple(site)}
    if action == "disconnect":
        return {"success": int(await req.ops.disconnect(site, mark_local=False)), "data": site_simple(site)}
    if action in ("suspend", "unsuspend"):
        (req.ops.suspend if action == "suspend" else req.ops.unsuspend)(site)
        return {"success": 1, "suspended": int(action == "suspend"), "data": site_simple(site)}
    if action == "remove":
        req.state.remove_site(site)
        return {"success": 1, "message": "The site has been removed.", "data": site_simple(site)}
    if action in ("plugins", "themes"):
        items = site.plugins if action == "plugins" else site.themes
        return {
            "success": 1,
            "total": len(items),
            "site": site_simple(site),
            "data": [
                {
                    "slug": i.slug,
                    "name": i.name,
                    "version": i.version,
                    "active": i.active,
                    "update_version": i.known_offer,
                }
                for i in items.values()
            ],
        }
    return {"success": 1, "total": 0, "data": [], "site": site_simple(site)}  # security, non-<ns>-changes


async def _sites_controller(req: RestRequest, body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for action, items in body.items():
        name = action.replace(f"non-{req.ns}-changes", "changes")
        if action == "create":
            out[action] = await _run(req, items, lambda r, d: sites.add_site_from(r, _obj(d)))
        elif action == "update":
            out[action] = await _run(req, items, lambda r, d: sites.edit_site_from(r, _site(r, d), _obj(d)))
        elif action == "delete":
            out[action] = await _run(req, items, lambda r, d: _site_action(r, "remove", d))
        elif action in SITE_ACTIONS or name == "changes":
            out[action] = await _run(req, items, lambda r, d, a=action: _site_action(r, a, d))
        else:
            known = ", ".join(("create", "update", "delete", *SITE_ACTIONS, f"non-{req.ns}-changes"))
            raise RestError("rest_invalid_param", f"Unknown sites batch action: {action}. Known: {known}.", 400)
    return out


def _obj(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise RestError("rest_invalid_param", "Each item must be an object.", 400)
    return item


def _crud_controller(
    create: Callable[[RestRequest, dict[str, Any]], Any],
    lookup: Callable[[RestRequest, Any], Any],
    edit: Callable[[RestRequest, Any, dict[str, Any]], Any],
    delete: Callable[[RestRequest, Any], Any],
) -> Controller:
    """A controller whose create, update and delete items answer as the family's single routes do."""
    runners: dict[str, ItemRunner] = {
        "create": lambda r, item: create(r, _obj(item)),
        "update": lambda r, item: edit(r, lookup(r, _obj(item).get("id")), item),
        "delete": lambda r, item: delete(r, lookup(r, item)),
    }

    async def controller(req: RestRequest, body: dict[str, Any]) -> dict[str, Any]:
        return {action: await _run(req, body[action], runner) for action, runner in runners.items() if action in body}

    return controller


async def _updates_controller(req: RestRequest, body: dict[str, Any]) -> dict[str, Any]:
    """`updates.create`: [{id: site, type?: plugins|themes|translations|wp, slug?: "a,b"}] runs updates."""
    from emulator.rest_v2.updates import item_answer

    async def run(r: RestRequest, item: Any) -> Any:
        data = _obj(item)
        site = _site(r, data)
        kind = data.get("type", "plugins")
        item_type = {"plugins": "plugin", "themes": "theme", "translations": "translation", "wp": "wp"}.get(kind)
        if item_type is None:
            raise RestError("rest_invalid_param", "type must be one of wp, plugins, themes, translations.", 400)
        slugs = [s for s in str(data.get("slug", "")).split(",") if s] or None
        results = await r.ops.update_items(site, item_type, slugs)  # type: ignore[arg-type]
        answer: dict[str, Any] = {}
        for result in results:
            answer.update(item_answer(result))
        return {"success": 1, "data": answer}

    return {"create": await _run(req, body.get("create", []), run)} if "create" in body else {}


CONTROLLERS: dict[str, Controller] = {
    "sites": _sites_controller,
    "tags": _crud_controller(tags.create_tag_from, tags.tag_or_404, tags.edit_tag_from, tags.delete_tag_for),
    "clients": _crud_controller(
        clients.create_client_from, clients.client_or_404, clients.edit_client_from, clients.delete_client_for
    ),
    "costs": _crud_controller(costs.create_cost_from, costs.cost_or_404, costs.edit_cost_from, costs.delete_cost_for),
    "updates": _updates_controller,
}


def _body(req: RestRequest) -> dict[str, Any]:
    body = req.json_body if isinstance(req.json_body, dict) else req.form
    if not isinstance(body, dict):
        raise RestError("rest_invalid_param", "The batch body must be a JSON object.", 400)
    return body


@routes.add(EDITABLE, "/batch")
async def global_batch(req: RestRequest) -> Any:
    body = _body(req)
    grouped: dict[str, dict[str, Any]] = {}
    for key, value in body.items():
        if key.startswith("sites_"):
            grouped.setdefault("sites", {})[key.removeprefix("sites_")] = value
        elif key in CONTROLLERS:
            if not isinstance(value, dict):
                raise RestError("rest_invalid_param", f"{key} must be an object of action arrays.", 400)
            grouped.setdefault(key, {}).update(value)
        else:
            raise RestError("rest_invalid_param", f"Unknown batch controller: {key}.", 400)
    _check_limit(req, sum(_count(v) for v in grouped.values()))
    out = {name: await CONTROLLERS[name](req, actions) for name, actions in grouped.items()}
    return {k: v for k, v in out.items() if v} or []


def _controller_route(name: str, module: str | None = None) -> None:
    @routes.add(EDITABLE, f"/{name}/batch", module=module)
    async def controller_batch(req: RestRequest) -> Any:
        body = _body(req)
        _check_limit(req, _count(body))
        return await CONTROLLERS[name](req, body)


for _name in ("sites", "tags", "clients"):
    _controller_route(_name)
_controller_route("costs", module="cost-tracker")
