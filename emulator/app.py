"""ASGI assembly: the WordPress REST index, REST v2, legacy v1, the ground-truth routes, the child sites' own
pages, the Abilities interface with its background jobs, and the fault middleware."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from emulator.abilities.routes import abilities_routes
from emulator.capacity import Capacity, ConnectionLimits, SlowSites
from emulator.clock import Clock
from emulator.config import EmulatorConfig
from emulator.credentials_file import credentials
from emulator.dispatch import dispatch, json_response
from emulator.faults import FaultController, install_faults, load_profile
from emulator.feed_control import FeedControl
from emulator.gateway import GatewayMiddleware
from emulator.ground_truth import ground_truth_routes
from emulator.guard import GuardDesk
from emulator.hosting import site_ip
from emulator.jobs import BatchJobs, running_jobs
from emulator.operations import SiteOperations
from emulator.rest import RestRoutes, no_route
from emulator.rest_v1 import build_v1_routes
from emulator.rest_v2.routes import build_v2_routes
from emulator.site_pages import site_page_routes
from emulator.state import FleetState
from emulator.vulnerabilities import vulnerability_routes


@dataclass
class Emulator:
    """Everything a handler needs: `request.app.state.emulator` in Starlette. The modules below this one name it
    by the members they use, `emulator.services.Emulator`."""

    config: EmulatorConfig
    state: FleetState
    clock: Clock
    capacity: Capacity
    operations: SiteOperations
    faults: FaultController
    jobs: BatchJobs
    v2_routes: RestRoutes
    v1_routes: RestRoutes
    base_url: str = ""
    feed: FeedControl = field(default_factory=FeedControl)  # the vulnerability feed's switches
    guards: GuardDesk = field(default_factory=GuardDesk)  # Fleet Guard's memory on the emulated sites

    def credentials(self, base_url: str | None = None) -> dict[str, Any]:
        return credentials(self.state, base_url or self.base_url, self.config.admin_token.get_secret_value())


def build_emulator(config: EmulatorConfig, state: FleetState | None = None) -> Emulator:
    """The services of one dashboard, in dependency order. A bad fault profile is a `ValueError`
    (`FaultProfileError`) raised before the database is touched."""
    profile = load_profile(config.faults)
    clock = Clock(config.time_scale)
    if state is None:
        state = FleetState.open(config, clock.now())
    state.now = clock.now
    capacity = Capacity(clock, config.workers, config.work_seconds, gateway_timeout=config.gateway_timeout,
                        slow_sites=SlowSites(config.seed, config.slow_site_rate, config.slow_site_factor),
                        limits=lambda: ConnectionLimits.from_options(
                            lambda suffix: state.settings["advanced"].get(config.name(suffix))),
                        ip_of=lambda site_id: site_ip(config.seed, site_id))
    operations = SiteOperations(state, capacity)
    faults = FaultController(state, operations, config.seed, profile)
    jobs = BatchJobs(state, operations, clock, faults.pick_job_fault)
    return Emulator(
        config, state, clock, capacity, operations, faults, jobs, build_v2_routes(), build_v1_routes()
    )


def rest_index(emulator: Emulator, request: Request) -> dict[str, Any]:
    ns = emulator.config.namespace
    root = str(request.base_url).rstrip("/") + "/wp-json"
    return {
        "name": "Fleet dashboard emulator",
        "description": "A site-management dashboard",
        "url": str(request.base_url).rstrip("/"),
        "home": str(request.base_url).rstrip("/"),
        "gmt_offset": "0",
        "timezone_string": "",
        "namespaces": [f"{ns}/v1", f"{ns}/v2", "wp-abilities/v1"],
        "authentication": {
            "application-passwords": {
                "endpoints": {
                    "authorization": str(request.base_url).rstrip("/") + "/wp-admin/authorize-application.php"
                }
            }
        },
        "routes": {
            f"/{ns}/v2": {
                "namespace": f"{ns}/v2",
                "methods": ["GET"],
                "_links": {"self": [{"href": f"{root}/{ns}/v2"}]},
            }
        },
    }


def namespace_index(emulator: Emulator, version: str) -> dict[str, Any]:
    ns = emulator.config.namespace
    routes = emulator.v2_routes if version == "v2" else emulator.v1_routes
    listing: dict[str, Any] = {}
    for route in routes.routes:
        if route.module is not None and route.module not in emulator.config.modules:
            continue
        path = f"/{ns}/{version}{route.label}"
        entry = listing.setdefault(path, {"namespace": f"{ns}/{version}", "methods": [], "endpoints": []})
        entry["methods"] = sorted(set(entry["methods"]) | set(route.methods))
        entry["endpoints"].append({"methods": sorted(route.methods), "args": {}})
    return {"namespace": f"{ns}/{version}", "routes": listing}


async def wp_json(request: Request) -> Response:
    emulator: Emulator = request.app.state.emulator
    ns = emulator.config.namespace
    path = "/" + request.path_params.get("path", "").strip("/")
    if path == "/":
        return json_response(rest_index(emulator, request))
    for version in ("v2", "v1"):
        prefix = f"/{ns}/{version}"
        if path == prefix and request.method == "GET":
            return json_response(namespace_index(emulator, version))
        if path.startswith(prefix + "/"):
            routes = emulator.v2_routes if version == "v2" else emulator.v1_routes
            raw = request.url.path.split(prefix, 1)[1].rstrip("/") or "/"
            return await dispatch(emulator, request, version, raw, routes)
    error = no_route()
    return json_response(error.body(), error.http_status)


def create_app(config: EmulatorConfig, state: FleetState | None = None) -> Starlette:
    """The emulator as an ASGI app; `app.state.emulator` is the `Emulator`."""
    emulator = build_emulator(config, state)
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    routes: list[BaseRoute] = [
        *ground_truth_routes(),
        *vulnerability_routes(),
        *site_page_routes(),
        *abilities_routes(emulator),
        Route("/wp-json", wp_json, methods=methods),
        Route("/wp-json/{path:path}", wp_json, methods=methods),  # the catch-all: keep it last
    ]
    # the job runner: the dashboard's cron
    app = Starlette(routes=routes, lifespan=lambda _app: running_jobs(emulator.jobs, emulator.capacity))
    app.state.emulator = emulator
    app.add_middleware(GatewayMiddleware, emulator=emulator)  # inside the faults: network faults hold no worker
    install_faults(app)
    return app
