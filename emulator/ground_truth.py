"""Ground truth for tests and benchmarks, outside the dashboard's namespaces and guarded by the admin token:
what is really installed, what the dashboard lists, ignore lists, request counts, and the switches that make
an item fail or take a site offline."""

from __future__ import annotations

import hmac
import json
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.dispatch import json_response
from emulator.records import ITEM_TYPES, Item, Site

if TYPE_CHECKING:
    from emulator.app import Emulator

PREFIX = "/__emulator__"


def _refused() -> Response:
    return json_response(
        {"code": "emulator_forbidden", "message": "A valid admin token is required.", "data": {"status": 403}}, 403
    )


def _bad(message: str, status: int = 400) -> Response:
    return json_response({"code": "emulator_bad_request", "message": message, "data": {"status": status}}, status)


def _authorised(request: Request) -> bool:
    emulator: Emulator = request.app.state.emulator
    expected = emulator.config.admin_token.get_secret_value()
    given = request.headers.get("x-emulator-token") or request.headers.get("authorization", "").removeprefix("Bearer ")
    return hmac.compare_digest(given.encode(), expected.encode())


def _item_truth(item: Item) -> dict[str, Any]:
    return {
        "name": item.name,
        "version": item.version,
        "offer": item.offer,
        "listed_version": item.known_version,
        "listed_offer": item.known_offer,
        "active": item.active,
    }


def site_truth(emulator: Emulator, site: Site) -> dict[str, Any]:
    state = emulator.state
    return {
        "id": site.id,
        "url": site.url,
        "status": state.site_status(site),
        "reachable": site.reachable,
        "child_connected": site.child_connected,
        "suspended": site.suspended,
        "sync_errors": site.sync_errors,
        "last_sync": site.last_sync,
        "wp": {
            "version": site.wp_version,
            "offer": site.wp_offer,
            "listed_version": site.known_wp_version,
            "listed_offer": site.known_wp_offer,
        },
        "plugins": {slug: _item_truth(i) for slug, i in site.plugins.items()},
        "themes": {slug: _item_truth(i) for slug, i in site.themes.items()},
        "translations": {slug: _item_truth(i) for slug, i in site.translations.items()},
        "pending_updates": [
            {"type": u.type, "slug": u.slug, "current_version": u.current_version, "new_version": u.new_version}
            for u in state.pending_updates(site)
        ],
        "ignored": {
            "plugins": site.ignored_plugins,
            "themes": site.ignored_themes,
            "core": site.ignored_core,
            "ignore_core_updates": site.ignore_core_updates,
            "ignore_plugin_updates": site.ignore_plugin_updates,
            "ignore_theme_updates": site.ignore_theme_updates,
        },
        "fail_items": site.fail_items,
    }


async def state_view(request: Request) -> Response:
    if not _authorised(request):
        return _refused()
    emulator: Emulator = request.app.state.emulator
    state = emulator.state
    wanted = request.query_params.get("site_ids")
    try:
        ids = [int(x) for x in wanted.split(",") if x.strip()] if wanted else list(state.sites)
    except ValueError:
        return _bad("site_ids must be a comma list of integers")
    return json_response(
        {
            "namespace": emulator.config.namespace,
            "site_count": len(state.sites),
            "sites": {str(i): site_truth(emulator, state.sites[i]) for i in ids if i in state.sites},
            "global_ignores": state.global_ignores,
            "options": state.options,
            "request_counts": dict(state.request_counts),
            "jobs": len(state.jobs),
        }
    )


async def _body(request: Request) -> dict[str, Any] | Response:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        return _bad("the body must be JSON")
    return body if isinstance(body, dict) else _bad("the body must be a JSON object")


async def set_item_fault(request: Request) -> Response:
    """POST {site_id, type: wp|plugin|theme|translation, slug, mode: "fail"|"silent"|null}."""
    if not _authorised(request):
        return _refused()
    emulator: Emulator = request.app.state.emulator
    body = await _body(request)
    if isinstance(body, Response):
        return body
    site = emulator.state.find_site(str(body.get("site_id", "")))
    item_type, slug, mode = body.get("type"), body.get("slug"), body.get("mode")
    if site is None:
        return _bad(f"unknown site {body.get('site_id')!r}", 404)
    if item_type not in ITEM_TYPES or not isinstance(slug, str) or mode not in ("fail", "silent", None):
        return _bad("type must be wp|plugin|theme|translation, slug a string, mode fail|silent|null")
    if item_type != "wp" and slug not in site.items(item_type):
        return _bad(f"site {site.id} has no {item_type} {slug!r}", 404)
    emulator.operations.set_item_fault(site, item_type, "wordpress" if item_type == "wp" else slug, mode)
    return json_response({"site_id": site.id, "type": item_type, "slug": slug, "mode": mode})


async def set_reachable(request: Request) -> Response:
    """POST {site_id, reachable: bool}: take a site offline or bring it back."""
    if not _authorised(request):
        return _refused()
    emulator: Emulator = request.app.state.emulator
    body = await _body(request)
    if isinstance(body, Response):
        return body
    site = emulator.state.find_site(str(body.get("site_id", "")))
    if site is None:
        return _bad(f"unknown site {body.get('site_id')!r}", 404)
    if not isinstance(body.get("reachable"), bool):
        return _bad("reachable must be true or false")
    emulator.operations.set_reachable(site, body["reachable"])
    return json_response({"site_id": site.id, "reachable": site.reachable})


async def offer_update(request: Request) -> Response:
    """POST {site_id, type, slug, version}: the child starts offering a new version (seen after a sync)."""
    if not _authorised(request):
        return _refused()
    emulator: Emulator = request.app.state.emulator
    body = await _body(request)
    if isinstance(body, Response):
        return body
    site = emulator.state.find_site(str(body.get("site_id", "")))
    item_type, slug, version = body.get("type"), body.get("slug"), body.get("version")
    if site is None:
        return _bad(f"unknown site {body.get('site_id')!r}", 404)
    if item_type not in ITEM_TYPES or not isinstance(version, str) or not isinstance(slug, str):
        return _bad("type must be wp|plugin|theme|translation; slug and version strings")
    if item_type == "wp":
        site.wp_offer = version
    elif slug in site.items(item_type):
        site.items(item_type)[slug].offer = version
    else:
        return _bad(f"site {site.id} has no {item_type} {slug!r}", 404)
    emulator.state.save_site(site)
    return json_response({"site_id": site.id, "type": item_type, "slug": slug, "offer": version})


async def set_options(request: Request) -> Response:
    """POST {name: value}: dashboard options such as `<ns>_rest_batch_items_limit`."""
    if not _authorised(request):
        return _refused()
    emulator: Emulator = request.app.state.emulator
    body = await _body(request)
    if isinstance(body, Response):
        return body
    unknown = [k for k in body if k not in emulator.state.options]
    if unknown:
        return _bad(f"unknown options {unknown}; known: {sorted(emulator.state.options)}")
    for name, value in body.items():
        emulator.state.set_option(name, value)
    return json_response(emulator.state.options)


def ground_truth_routes() -> list[Route]:
    return [
        Route(f"{PREFIX}/state", state_view, methods=["GET"]),
        Route(f"{PREFIX}/faults/items", set_item_fault, methods=["POST"]),
        Route(f"{PREFIX}/faults/reachable", set_reachable, methods=["POST"]),
        Route(f"{PREFIX}/offers", offer_update, methods=["POST"]),
        Route(f"{PREFIX}/options", set_options, methods=["POST"]),
    ]
