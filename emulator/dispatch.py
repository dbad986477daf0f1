"""From an HTTP request under `/wp-json` to a handler: authentication first (as the dashboard does before
routing), then the body, the route, the module switch; every failure becomes a WordPress error body."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from emulator.auth import AuthFailure, authenticate_v1, authenticate_v2
from emulator.json_input import LARGE_BYTES, off_the_loop_if
from emulator.rest import RestError, RestRequest, RestResponse, RestRoutes, no_route, parse_body, parse_php_pairs

if TYPE_CHECKING:
    from emulator.services import Emulator

log = logging.getLogger(__name__)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")),
        status_code=status,
        headers=headers,
        media_type="application/json; charset=UTF-8",
    )


async def dispatch(emulator: Emulator, request: Request, version: str, rest_path: str, routes: RestRoutes) -> Response:
    """`version` is "v1" or "v2"; `rest_path` is the path after `/wp-json/{ns}/{version}`."""
    state = emulator.state
    method = request.method.upper()
    query = parse_php_pairs(request.query_params.multi_items())
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        if version == "v1" and not state.option("enable_legacy_rest_api"):
            raise no_route()
        try:
            key = (
                authenticate_v2(state, method, headers, query)
                if version == "v2"
                else authenticate_v1(state, method, headers, query)
            )
        except AuthFailure as failure:
            return json_response(failure.body, 401)
        matched = routes.match(method, rest_path or "/", emulator.config.modules)
        if matched is None:
            raise no_route()
        route, path_params = matched
        raw = await request.body()
        content_type = headers.get("content-type", "")
        form, json_body = await off_the_loop_if(len(raw) > LARGE_BYTES, parse_body, content_type, raw)
        state.request_counts[f"{method} /{emulator.config.namespace}/{version}{route.label}"] += 1
        rest_request = RestRequest(
            emulator,
            method,
            rest_path,
            query,
            form,
            json_body,
            headers.get("content-type", ""),
            path_params,
            key if version == "v2" else None,
        )
        result = await route.handler(rest_request)
    except RestError as error:
        return json_response(error.body(), error.http_status)
    except Exception:  # the emulator's own bug must still answer like WordPress, never with a traceback
        log.exception("emulator handler failed for %s %s", method, request.url.path)
        return json_response(
            {
                "code": "internal_server_error",
                "message": "There has been a critical error on this website.",
                "data": {"status": 500},
            },
            500,
        )
    if isinstance(result, RestResponse):
        return json_response(result.body, result.status, result.headers)
    if isinstance(result, Response):
        return result
    return json_response(result)
