"""The Abilities interface over HTTP (`/wp-json/wp-abilities/v1`): discovery, categories and `/run`, with
WordPress core's order of checks: ability, method, input, permission, execution, output."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from emulator.abilities import batch, clients, core, sites, tags, updates
from emulator.abilities.catalog import Ability, Catalog, catalog_for
from emulator.abilities.context import AbilityContext
from emulator.abilities.errors import AbilityError
from emulator.abilities.validation import MISSING, InputDecodeError, coerce, decode_query_input, reason, with_defaults
from emulator.auth import APP_USER, AuthFailure, check_api_key, check_method, parse_basic, verify_application_password
from emulator.dispatch import json_response
from emulator.json_input import LARGE_BYTES, JsonInputError, decode_json, off_the_loop_if

if TYPE_CHECKING:
    from emulator.records import ApiKey
    from emulator.services import Emulator

log = logging.getLogger(__name__)

ROOT = "/wp-json/wp-abilities/v1"
Handler = Callable[[AbilityContext, Any], Awaitable[Any]]
HANDLERS: dict[str, Handler] = {
    **core.HANDLERS, **sites.HANDLERS, **updates.HANDLERS, **clients.HANDLERS, **tags.HANDLERS, **batch.HANDLERS,
}
# Abilities whose permission callback resolves the site: an unknown site is refused there (403).
SITE_SCOPED = sites.SITE_SCOPED | updates.SITE_SCOPED
METHOD_MESSAGES = {
    "GET": "Read-only abilities require GET method.",
    "DELETE": "Abilities that perform destructive actions require DELETE method.",
    "POST": "Abilities that perform updates require POST method.",
}
FORBIDDEN = AbilityError("rest_forbidden", "Sorry, you are not allowed to do that.", 401)
# What WordPress answers in `Allow` once a `/run` request passed its permission check (the route's methods).
RUN_ALLOW = "GET, POST, PUT, PATCH, DELETE"


@dataclass
class Caller:
    """Who is asking: the application-password user, an API key's user, or nobody."""

    logged_in: bool
    key: ApiKey | None = None


def error_answer(error: AbilityError, site_root: str, allow: str | None = None) -> Response:
    headers = {"Link": f'<{site_root}/wp-json/>; rel="https://api.w.org/"'}
    if allow is not None:
        headers["Allow"] = allow
    return json_response(error.body(), error.http_status, headers)


def _site_root(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


def identify(emulator: Emulator, request: Request) -> Caller:
    """WordPress's own authentication (application passwords over Basic) and, unless the config refuses it,
    the dashboard's API-key Bearer header. Bad credentials fail every route before routing, as in WordPress."""
    authorization = request.headers.get("authorization", "")
    basic = parse_basic(authorization)
    if basic is not None:
        username, password = basic
        if username != APP_USER:
            raise AbilityError("invalid_username", "Unknown username. Check again or try your email address.", 401)
        if not verify_application_password(emulator.state, username, password):
            raise AbilityError("incorrect_password", "The provided password is an invalid application password.", 401)
        return Caller(True)
    if authorization.lower().startswith("bearer ") and emulator.config.abilities_accept_bearer:
        secret, separator, key_hex = authorization[7:].strip().partition("==")
        ns = emulator.config.namespace
        if not separator or not secret or not key_hex:
            raise AbilityError(f"{ns}_rest_authentication_missing_parameter", "Invalid OAuth parameter.", 401)
        try:
            key = check_api_key(emulator.state, "ck_" + key_hex, "cs_" + secret)
        except AuthFailure as failure:
            raise AbilityError(failure.code, failure.message, 401) from None
        return Caller(True, key)
    return Caller(False)


def ability_links(root: str, ability: Ability) -> dict[str, Any]:
    return {
        "self": [{"href": f"{root}/abilities/{ability.name}", "targetHints": {"allow": ["GET"]}}],
        "collection": [{"href": f"{root}/abilities"}],
        "wp:action-run": [{"href": f"{root}/abilities/{ability.name}/run"}],
    }


def category_links(root: str, slug: str) -> dict[str, Any]:
    return {
        "self": [{"href": f"{root}/categories/{slug}", "targetHints": {"allow": ["GET"]}}],
        "collection": [{"href": f"{root}/categories"}],
        "abilities": [{"href": f"{root}/abilities?category={slug}"}],
    }


def _bounded_int(request: Request, name: str, default: int, low: int, high: int | None) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.strip().lstrip("-").isdigit():
        raise _invalid_param(name, f"{name} is not of type integer.", "rest_invalid_type")
    value = int(raw)
    if high is not None and not low <= value <= high:
        raise _invalid_param(name, f"{name} must be between {low} (inclusive) and {high} (inclusive)")
    if value < low:
        raise _invalid_param(name, f"{name} must be greater than or equal to {low}")
    return value


def _invalid_param(name: str, message: str, code: str = "rest_out_of_bounds") -> AbilityError:
    return AbilityError("rest_invalid_param", f"Invalid parameter(s): {name}", 400, params={name: message},
                        details={name: {"code": code, "message": message, "data": None}})


def abilities_routes(emulator: Emulator) -> list[BaseRoute]:
    """The routes of `/wp-json/wp-abilities/v1`, to put before the emulator's `/wp-json/{path}` catch-all."""
    catalog = catalog_for(emulator.config.namespace)

    async def list_abilities(request: Request) -> Response:
        site_root = _site_root(request)
        root = site_root + ROOT
        try:
            if not identify(emulator, request).logged_in:
                raise FORBIDDEN
        except AbilityError as error:
            return error_answer(error, site_root)
        try:
            page = _bounded_int(request, "page", 1, 1, None)
            per_page = _bounded_int(request, "per_page", 50, 1, 100)
        except AbilityError as error:  # past the permission check: the route's `Allow`
            return error_answer(error, site_root, "GET")
        listed = catalog.listed(request.query_params.get("category") or None)
        total = len(listed)
        pages = max((total + per_page - 1) // per_page, 1) if total else 0
        body = [a.describe() | {"_links": ability_links(root, a)}
                for a in listed[(page - 1) * per_page : page * per_page]]
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != "page"]
        links = []
        if page > 1:
            links.append(f'<{root}/abilities?{urlencode([*kept, ("page", min(page - 1, pages) or 1)])}>; rel="prev"')
        if page < pages:
            links.append(f'<{root}/abilities?{urlencode([*kept, ("page", page + 1)])}>; rel="next"')
        headers = {"X-WP-Total": str(total), "X-WP-TotalPages": str(pages), "Allow": "GET"}
        if links:
            headers["Link"] = ", ".join(links)
        return json_response(body, headers=headers)

    async def list_categories(request: Request) -> Response:
        site_root = _site_root(request)
        try:
            if not identify(emulator, request).logged_in:
                raise FORBIDDEN
        except AbilityError as error:
            return error_answer(error, site_root)
        body = [c.describe() | {"_links": category_links(site_root + ROOT, c.slug)}
                for c in catalog.categories.values()]
        return json_response(body, headers={"X-WP-Total": str(len(body)), "X-WP-TotalPages": "1", "Allow": "GET"})

    async def one_category(request: Request) -> Response:
        site_root = _site_root(request)
        try:
            if not identify(emulator, request).logged_in:
                raise FORBIDDEN
            category = catalog.categories.get(request.path_params["slug"])
            if category is None:
                raise AbilityError("rest_ability_category_not_found", "Ability category not found.", 404)
        except AbilityError as error:
            return error_answer(error, site_root)
        return json_response(category.describe() | {"_links": category_links(site_root + ROOT, category.slug)},
                           headers={"Allow": "GET"})

    async def ability_or_run(request: Request) -> Response:
        site_root = _site_root(request)
        path = request.path_params["path"].strip("/")
        try:
            caller = identify(emulator, request)
            if path.endswith("/run"):
                return await run(emulator, catalog, request, path[: -len("/run")], caller, site_root)
            if not caller.logged_in:
                raise FORBIDDEN
        except AbilityError as error:
            return error_answer(error, site_root)
        ability = catalog.get(path)
        if ability is None:
            return error_answer(AbilityError("rest_ability_not_found", "Ability not found.", 404), site_root, "GET")
        return json_response(ability.describe() | {"_links": ability_links(site_root + ROOT, ability)},
                           headers={"Allow": "GET"})

    async def namespace_index(request: Request) -> Response:
        root = _site_root(request) + "/wp-json"
        paths = ("", "/abilities", "/abilities/(?P<name>[a-zA-Z0-9\\-\\/]+)",
                 "/abilities/(?P<name>[a-zA-Z0-9\\-\\/]+?)/run", "/categories", "/categories/(?P<slug>[a-z0-9-]+)")
        routes = {f"/wp-abilities/v1{p}": {"namespace": "wp-abilities/v1",
                                           "methods": ["GET", "POST", "DELETE"] if p.endswith("/run") else ["GET"]}
                  for p in paths}
        return json_response({"namespace": "wp-abilities/v1", "routes": routes,
                            "_links": {"up": [{"href": root + "/"}]}})

    return [
        Route(ROOT, namespace_index, methods=["GET"]),
        Route(ROOT + "/", namespace_index, methods=["GET"]),
        Route(f"{ROOT}/abilities", list_abilities, methods=["GET"]),
        Route(f"{ROOT}/abilities/{{path:path}}", ability_or_run, methods=["GET", "POST", "DELETE", "PUT", "PATCH"]),
        Route(f"{ROOT}/categories", list_categories, methods=["GET"]),
        Route(f"{ROOT}/categories/{{slug}}", one_category, methods=["GET"]),
    ]


def _invalid_json(error: JsonInputError) -> AbilityError:
    return AbilityError("rest_invalid_json", "Invalid JSON body passed.", 400,
                        json_error_code=error.code, json_error_message=error.message)


async def read_input(request: Request, method: str, large: bool) -> Any:
    """GET and DELETE take `input` from the query; POST from the JSON body `{"input": ...}` (or the query).
    A large input is decoded in a thread."""
    if method == "POST":
        raw = await request.body()
        if raw.strip():
            try:
                body = await off_the_loop_if(large, decode_json, raw)
            except JsonInputError as error:
                raise _invalid_json(error) from None
            if isinstance(body, dict) and "input" in body:
                return body["input"]
    try:
        value = await off_the_loop_if(large, decode_query_input, request.query_params.multi_items())
    except InputDecodeError as exc:
        raise AbilityError("rest_invalid_param", f"Invalid parameter(s): input ({exc})", 400) from None
    except JsonInputError as error:
        raise _invalid_json(error) from None
    return None if value is MISSING else value


def _checked_input(ability: Ability, raw_input: Any) -> tuple[Any, str | None]:
    """(the input with WordPress's coercion and defaults, the reason it is invalid or None)."""
    if not ability.input_schema:
        if raw_input is not None:
            raise AbilityError("ability_missing_input_schema", f'Ability "{ability.name}" does not define an input '
                               "schema required to validate the provided input.", 400)
        return None, None
    value = with_defaults(ability.input_schema, coerce(ability.input_schema, raw_input))
    return value, reason(ability.input_schema, value, "input")


def _answer(ability: Ability, output: Any, site_root: str) -> Response:
    problem = reason(ability.output_schema, output, "output")
    if problem is not None:
        log.error("ability %s produced an invalid output: %s", ability.name, problem)
        raise AbilityError("ability_invalid_output",
                           f'Ability "{ability.name}" has invalid output. Reason: {problem}', 500)
    return json_response(output, headers={"Link": f'<{site_root}/wp-json/>; rel="https://api.w.org/"',
                                          "Allow": RUN_ALLOW})


async def run(emulator: Emulator, catalog: Catalog, request: Request, name: str, caller: Caller,
              site_root: str) -> Response:
    ability = catalog.get(name)
    if ability is None:
        raise AbilityError("rest_ability_not_found", "Ability not found.", 404)
    method = "GET" if request.method == "HEAD" else request.method
    emulator.state.request_counts[f"{method} /wp-abilities/v1/{ability.name}"] += 1  # ground truth, beside REST
    if method not in ability.allowed_methods:
        raise AbilityError("rest_ability_invalid_method", METHOD_MESSAGES[ability.run_method], 405)
    large = int(request.headers.get("content-length") or 0) + len(request.url.query) > LARGE_BYTES
    raw_input = await read_input(request, method, large)
    value, problem = await off_the_loop_if(large, _checked_input, ability, raw_input)
    if problem is not None:
        raise AbilityError("ability_invalid_input", f'Ability "{ability.name}" has invalid input. Reason: {problem}',
                           400)
    ns = emulator.config.namespace
    if not caller.logged_in:
        if ability.name.startswith("core/"):
            raise AbilityError("rest_ability_cannot_execute", "Sorry, you are not allowed to execute this ability.",
                               401)
        raise AbilityError(f"{ns}_permission_denied", "You must be logged in to access this ability.", 401,
                           additional_data=[{"status": 401}])
    if caller.key is not None:
        try:
            check_method(emulator.state, caller.key, method)
        except AuthFailure as failure:
            raise AbilityError(failure.code, failure.message, 401) from None
    context = AbilityContext(emulator, ability, site_root)
    if ability.short_name in SITE_SCOPED:
        try:
            context.resolve_site((value or {}).get("site_id_or_domain"))
        except AbilityError as error:
            raise error.in_permission_phase() from None
    if ability.module is not None:
        context.module_required(ability.module)
    handler = HANDLERS[ability.name if ability.name.startswith("core/") else ability.short_name]
    try:
        args = with_defaults(ability.input_schema, value if value is not None else {})
        output = await handler(context, args)
    except AbilityError as error:  # past the permission check: the answer carries the route's `Allow`
        return error_answer(error, site_root, RUN_ALLOW)
    except Exception:  # the emulator's own bug still answers like WordPress, never with a traceback
        log.exception("ability %s failed", ability.name)
        raise AbilityError("internal_server_error", "There has been a critical error on this website.",
                           500) from None
    return await off_the_loop_if(large, _answer, ability, output, site_root)
