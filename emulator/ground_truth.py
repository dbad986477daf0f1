"""Ground truth for tests and benchmarks, outside the dashboard's namespaces and guarded by the admin token:
what is really installed, what the dashboard lists, ignore lists, request counts, jobs, the capacity model's
ledger and the fault counters; and the switches that make an item fail, take a site offline, break or fix a
site's front end or break its pages visually, connect a site that already runs, or change the fault profile. Bad
input gets the same WordPress-style error body as the dashboard's own routes."""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from emulator.dispatch import json_response
from emulator.faults import FaultProfileError, load_profile
from emulator.guard import arm
from emulator.guard import truth as guard_truth
from emulator.json_input import JsonInputError, decode_json
from emulator.records import ITEM_TYPES, Item, ItemType, Site
from emulator.rest import RestError
from emulator.site_pages import front_end_status
from emulator.visual_faults import VISUAL_ITEM_TYPES, VISUAL_MODES, break_directly, mark_release, visual_break

if TYPE_CHECKING:
    from emulator.services import Emulator

PREFIX = "/__emulator__"
log = logging.getLogger(__name__)

AdminHandler = Callable[[Request, "Emulator"], Awaitable[Any]]


class GroundTruthError(RestError):
    """Bad input to a ground-truth route, answered in WordPress's `{code, message, data: {status}}` shape."""

    def __init__(self, message: str, status: int = 400, code: str = "emulator_bad_request") -> None:
        super().__init__(code, message, status)

    def response(self) -> Response:
        return json_response(self.body(), self.http_status)


def _authorised(request: Request, emulator: Emulator) -> bool:
    expected = emulator.config.admin_token.get_secret_value()
    authorization = request.headers.get("authorization", "")
    bearer = authorization[7:] if authorization.lower().startswith("bearer ") else ""
    given = (request.headers.get("x-emulator-token") or bearer).strip()
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def admin_only(handler: AdminHandler) -> Callable[[Request], Awaitable[Response]]:
    """Check the admin token, run the handler, answer its result as JSON and its `GroundTruthError` as a 4xx."""

    async def endpoint(request: Request) -> Response:
        emulator: Emulator = request.app.state.emulator
        try:
            if not _authorised(request, emulator):
                raise GroundTruthError("A valid admin token is required.", 403, "emulator_forbidden")
            return json_response(await handler(request, emulator))
        except GroundTruthError as error:
            return error.response()
        except Exception:  # the emulator's own bug: logged, answered in the same shape, never a traceback
            log.exception("ground-truth route %s failed", request.url.path)
            return GroundTruthError("the emulator failed; see its log", 500, "emulator_error").response()

    return endpoint


async def json_object(request: Request) -> dict[str, Any]:
    try:
        body = decode_json(await request.body() or b"{}")
    except JsonInputError:
        raise GroundTruthError("the body must be JSON") from None
    if not isinstance(body, dict):
        raise GroundTruthError("the body must be a JSON object")
    return body


def site_in(emulator: Emulator, body: dict[str, Any]) -> Site:
    """The site named by `site_id` (an id or a domain)."""
    site = emulator.state.find_site(str(body.get("site_id", "")))
    if site is None:
        raise GroundTruthError(f"unknown site {body.get('site_id')!r}", 404)
    return site


def item_in(site: Site, body: dict[str, Any]) -> tuple[ItemType, str]:
    """(type, slug) named by the body, checked against what the site has; core is always there."""
    item_type, slug = body.get("type"), body.get("slug")
    if item_type not in ITEM_TYPES or not isinstance(slug, str):
        raise GroundTruthError("type must be wp|plugin|theme|translation and slug a string")
    if item_type != "wp" and slug not in site.items(item_type):
        raise GroundTruthError(f"site {site.id} has no {item_type} {slug!r}", 404)
    return item_type, slug


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
        "slow": emulator.capacity.slow_sites.is_slow(site.id),
        "ip": emulator.capacity.ip_of(site.id),
        "child_version": site.child_version,
        "synced_child_version": site.synced_child_version,  # the dashboard's record its child-version gate reads
        "offline_check_result": site.offline_check_result,
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
        "front_end": {"status": front_end_status(site), "broken": site.front_end_broken,
                      "broken_by": site.broken_by or None, "dead_at_load": site.dead_at_load,
                      "fatal_by": site.fatal_by or None},
        "visual": _visual_truth(site),
        "guard": guard_truth(site),
    }


def _visual_truth(site: Site) -> dict[str, Any]:
    """The visual break a visitor sees now (mode and culprit) and the releases marked to break the page."""
    now = visual_break(site)
    return {"break": now[0] if now else None, "by": now[1] if now else None,
            "marked": {key: {"mode": mode, "version": version} for key, (mode, version) in site.visual_faults.items()}}


def job_truth(job: dict[str, Any]) -> dict[str, Any]:
    return {key: job[key] for key in ("job_id", "type", "status", "progress", "processed", "total")}


@admin_only
async def state_view(request: Request, emulator: Emulator) -> dict[str, Any]:
    """Everything at once; `?site_ids=1,2` narrows the per-site part (`site_ids=0`: none)."""
    state = emulator.state
    wanted = request.query_params.get("site_ids")
    try:
        ids = [int(x) for x in wanted.split(",") if x.strip()] if wanted else list(state.sites)
    except ValueError:
        raise GroundTruthError("site_ids must be a comma list of integers") from None
    return {
        "namespace": emulator.config.namespace,
        "site_count": len(state.sites),
        "sites": {str(i): site_truth(emulator, state.sites[i]) for i in ids if i in state.sites},
        "global_ignores": state.global_ignores,
        "options": state.options,
        "request_counts": dict(state.request_counts),
        "jobs": len(state.jobs),
        "batch_jobs": [job_truth(job) for job in state.jobs.values()],
        "capacity": emulator.capacity.snapshot(state.sites),
        "faults": {"profile": emulator.faults.profile.name, "counts": dict(emulator.faults.counts)},
        "guard_calls": dict(emulator.guards.calls),
    }


@admin_only
async def set_item_fault(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {site_id, type: wp|plugin|theme|translation, slug, mode: "fail"|"silent"|"break"|"load"|null}; "break":
    the item's next update succeeds and breaks the site's front end (a critical-error page until fixed); "load": it
    succeeds, then WordPress fatals while loading (pages answer 500 and the MainWP Child answers nothing);
    "rollback" (plugins, themes): WordPress rolls the install back and the dashboard remembers it."""
    body = await json_object(request)
    site = site_in(emulator, body)
    item_type, slug = item_in(site, body)
    mode = body.get("mode")
    if mode not in ("fail", "silent", "break", "load", "rollback", None):
        raise GroundTruthError("mode must be fail, silent, break, load, rollback or null")
    emulator.operations.set_item_fault(site, item_type, "wordpress" if item_type == "wp" else slug, mode)
    return {"site_id": site.id, "type": item_type, "slug": slug, "mode": mode}


@admin_only
async def set_reachable(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {site_id, reachable: bool}: take a site offline or bring it back."""
    body = await json_object(request)
    site = site_in(emulator, body)
    if not isinstance(body.get("reachable"), bool):
        raise GroundTruthError("reachable must be true or false")
    emulator.operations.set_reachable(site, body["reachable"])
    return {"site_id": site.id, "reachable": site.reachable}


@admin_only
async def set_front_end(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {site_id, broken: bool}: break the site's front end directly, or fix it whatever broke it."""
    body = await json_object(request)
    site = site_in(emulator, body)
    if not isinstance(body.get("broken"), bool):
        raise GroundTruthError("broken must be true or false")
    emulator.operations.set_front_end_broken(site, body["broken"])
    return {"site_id": site.id, "front_end": front_end_status(site), "broken_by": site.broken_by or None}


@admin_only
async def repair_site(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {site_id}: the operator's repair by hand (the culprit plugin's folder renamed, so WordPress deactivates
    it). The site loads again; the dashboard keeps refusing it while it is known offline, until a check passes."""
    body = await json_object(request)
    site = site_in(emulator, body)
    culprit = emulator.operations.repair(site)
    return {"site_id": site.id, "repaired": culprit or None, "front_end": front_end_status(site),
            "offline_check_result": site.offline_check_result}


@admin_only
async def add_site(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {url, name?, admin?, client_id?, tag_ids?}: the operator connects a WordPress site that already runs
    (MainWP's Add New Site: its URL and admin), with plugins, themes and pending releases of its own; the
    dashboard lists its updates only after a sync. Answers the site's ground truth."""
    body = await json_object(request)
    url = body.get("url")
    if not isinstance(url, str) or not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:\d+)?/?", url.strip()):
        raise GroundTruthError("url must be a site's address, such as https://shop.example.com/")
    url = url.strip().rstrip("/") + "/"
    state = emulator.state
    if state.find_site(url) is not None:
        raise GroundTruthError(f"{url} is already connected to the dashboard", 409)
    name, admin = body.get("name", url.split("://", 1)[1].rstrip("/")), body.get("admin", "admin")
    client_id, tag_ids = body.get("client_id", 0), body.get("tag_ids", [])
    if not isinstance(name, str) or not name.strip() or not isinstance(admin, str) or not admin.strip():
        raise GroundTruthError("name and admin must be non-empty strings")
    if not isinstance(client_id, int) or (client_id and client_id not in state.clients):
        raise GroundTruthError(f"unknown client {client_id!r}", 404)
    if not isinstance(tag_ids, list) or any(not isinstance(t, int) or t not in state.tags for t in tag_ids):
        raise GroundTruthError(f"tag_ids must list existing tag ids, not {tag_ids!r}", 404)
    site = state.connect_child(url, name.strip(), admin.strip(), client_id, tag_ids)
    return site_truth(emulator, site)


@admin_only
async def set_visual_fault(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {site_id, mode: css|blank|null, type?, slug?}: with an item, the release it offers now breaks the page
    visually once installed; without, the page breaks now (null lifts either)."""
    body = await json_object(request)
    site = site_in(emulator, body)
    mode = body.get("mode")
    if mode is not None and mode not in VISUAL_MODES:
        raise GroundTruthError(f"mode must be one of {', '.join(VISUAL_MODES)} or null")
    if "type" in body or "slug" in body:
        item_type, slug = item_in(site, body)
        if item_type not in VISUAL_ITEM_TYPES:
            raise GroundTruthError("a visual break needs a release of core, a plugin or a theme")
        if not mark_release(emulator.state, site, item_type, slug, mode):
            raise GroundTruthError(f"site {site.id}'s {item_type} {slug!r} offers no release to mark", 409)
    else:
        break_directly(emulator.state, site, mode)
    return {"site_id": site.id, "visual": _visual_truth(site)}


@admin_only
async def offer_update(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {site_id, type, slug, version}: the child starts offering a new version (seen after a sync)."""
    body = await json_object(request)
    site = site_in(emulator, body)
    item_type, slug = item_in(site, body)
    version = body.get("version")
    if not isinstance(version, str):
        raise GroundTruthError("version must be a string")
    if item_type == "wp":
        site.wp_offer = version
    else:
        site.items(item_type)[slug].offer = version
    emulator.state.save_site(site)
    return {"site_id": site.id, "type": item_type, "slug": slug, "offer": version}


@admin_only
async def lose_answers(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {call, times}: the next `times` requests naming `call` (`check-sites-v1`, `/sites/3/sync`) are worked
    to the end and answered with the gateway's 504."""
    body = await json_object(request)
    call, times = body.get("call"), body.get("times", 1)
    if not isinstance(call, str) or not call.strip() or not isinstance(times, int) or times < 0:
        raise GroundTruthError("call must be a non-empty string and times a count")
    emulator.faults.lose_answers(call.strip(), times)
    return {"call": call.strip(), "times": times}


@admin_only
async def set_options(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {name: value}: dashboard options such as `<ns>_rest_batch_items_limit`."""
    body = await json_object(request)
    unknown = [k for k in body if k not in emulator.state.options]
    if unknown:
        raise GroundTruthError(f"unknown options {unknown}; known: {sorted(emulator.state.options)}")
    for name, value in body.items():
        emulator.state.set_option(name, value)
    return emulator.state.options


@admin_only
async def faults(request: Request, emulator: Emulator) -> dict[str, Any]:
    """GET: the fault profile and its counters. PUT|POST {"profile": name | path | mapping}: switch to it."""
    if request.method != "GET":
        spec = (await json_object(request)).get("profile")
        if not isinstance(spec, str | dict):
            raise GroundTruthError('send {"profile": "none" | "realistic" | "hostile" | path | {...}}')
        try:
            emulator.faults.switch(load_profile(spec))
        except FaultProfileError as error:
            raise GroundTruthError(str(error)) from None
    return emulator.faults.snapshot()


@admin_only
async def hold_cron(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {"held": true|false}: WP-Cron fires no more (due jobs wait, as on a dashboard nobody visits), or again."""
    held = (await json_object(request)).get("held")
    if not isinstance(held, bool):
        raise GroundTruthError('send {"held": true} or {"held": false}')
    emulator.jobs.hold(held)
    return {"held": held}


@admin_only
async def set_guard(request: Request, emulator: Emulator) -> dict[str, Any]:
    """POST {site_id, armed?: bool, keys?: [base64 public keys], version?, removed?: bool, loader?: "placed" | a
    problem (the must-use loader missing, and why), disk_full?: bool, corrupt?: ["type:slug@version", ...]}: Fleet
    Guard installed (armed with `keys`) or not on a site, and its faults: an older version, removed by the
    owner (its loader does nothing), the loader not placed (an unwritable must-use folder), a full disk, a kept
    version whose checksum no longer matches."""
    body = await json_object(request)
    site = site_in(emulator, body)
    if "armed" in body:
        if not isinstance(body["armed"], bool):
            raise GroundTruthError("armed must be true or false")
        keys = body.get("keys", site.guard.get("keys", []))
        if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
            raise GroundTruthError("keys must list base64 public keys")
        if body["armed"]:
            arm(site, keys)
        else:
            site.guard = {}
    if not site.guard and set(body) - {"site_id", "armed"}:
        raise GroundTruthError(f"site {site.id} has no guard: arm it first", 409)
    for name, kind in (("version", str), ("removed", bool), ("disk_full", bool), ("corrupt", list)):
        if name in body:
            if not isinstance(body[name], kind):
                raise GroundTruthError(f"{name} must be a {kind.__name__}")
            site.guard[name] = body[name]
    if "loader" in body:
        loader = body["loader"]
        if not isinstance(loader, str) or not loader:
            raise GroundTruthError('loader must be "placed" or the reason it is missing')
        site.guard["mode"] = "must-use" if loader == "placed" else "plugin"
        site.guard["loader_problem"] = None if loader == "placed" else loader
    emulator.state.save_site(site)
    return {"site_id": site.id, "guard": guard_truth(site)}


def ground_truth_routes() -> list[Route]:
    return [
        Route(f"{PREFIX}/state", state_view, methods=["GET"]),
        Route(f"{PREFIX}/faults", faults, methods=["GET", "PUT", "POST"]),
        Route(f"{PREFIX}/faults/items", set_item_fault, methods=["POST"]),
        Route(f"{PREFIX}/faults/reachable", set_reachable, methods=["POST"]),
        Route(f"{PREFIX}/faults/front-end", set_front_end, methods=["POST"]),
        Route(f"{PREFIX}/sites/repair", repair_site, methods=["POST"]),
        Route(f"{PREFIX}/sites/add", add_site, methods=["POST"]),
        Route(f"{PREFIX}/faults/visual", set_visual_fault, methods=["POST"]),
        Route(f"{PREFIX}/offers", offer_update, methods=["POST"]),
        Route(f"{PREFIX}/faults/lost-answers", lose_answers, methods=["POST"]),
        Route(f"{PREFIX}/options", set_options, methods=["POST"]),
        Route(f"{PREFIX}/cron", hold_cron, methods=["POST"]),
        Route(f"{PREFIX}/guard", set_guard, methods=["POST"]),
    ]
