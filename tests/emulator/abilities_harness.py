"""An in-process emulator app (abilities, background jobs, faults), optionally with its lifespan running, and
clients for the Abilities interface with each kind of credential."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.applications import Starlette

from emulator.abilities.catalog import catalog_for
from emulator.app import Emulator, create_app
from emulator.config import EmulatorConfig
from emulator.jobs import BatchJobs

ROOT_URL = "http://emulator.test"
ABILITIES = "/wp-json/wp-abilities/v1"


def build_app(config: EmulatorConfig) -> Starlette:
    app = create_app(config)
    app.state.emulator.base_url = ROOT_URL + "/wp-json"
    return app


@dataclass
class Dashboard:
    app: Starlette

    @property
    def emulator(self) -> Emulator:
        return self.app.state.emulator

    @property
    def jobs(self) -> BatchJobs:
        return self.emulator.jobs

    @property
    def credentials(self) -> dict[str, Any]:
        return self.emulator.credentials(ROOT_URL + "/wp-json")

    def client(self, auth: str | None = "app", **kwargs: Any) -> httpx.AsyncClient:
        """`auth`: "app" (application password), "read_write" / "read" / "disabled" (API key bearer) or None."""
        headers: dict[str, str] = dict(kwargs.pop("headers", {}))
        basic: tuple[str, str] | None = None
        if auth == "app":
            app_password = self.credentials["application_password"]
            basic = (app_password["username"], app_password["password"])
        elif auth is not None:
            headers["Authorization"] = "Bearer " + self.credentials["api_keys"][auth]
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url=ROOT_URL + ABILITIES,
                                 auth=basic, headers=headers, **kwargs)

    def set_option(self, suffix: str, value: Any) -> None:
        state = self.emulator.state
        state.set_option(state.config.name(suffix), value)


@contextlib.asynccontextmanager
async def dashboard(config: EmulatorConfig, *, lifespan: bool = True) -> AsyncIterator[Dashboard]:
    """The app with its lifespan (and so the job runner) running; the state is closed afterwards."""
    app = build_app(config)
    try:
        if lifespan:
            async with app.router.lifespan_context(app):
                yield Dashboard(app)
        else:
            yield Dashboard(app)
    finally:
        app.state.emulator.state.close()


async def run(client: httpx.AsyncClient, name: str, payload: dict[str, Any] | None = None,
              method: str | None = None) -> httpx.Response:
    """Run an ability with the method its annotations require (GET/DELETE: input in the query as JSON)."""
    namespace = name.split("/", 1)[0]
    ability = catalog_for("svc" if namespace == "core" else namespace).get(name)
    verb = method or (ability.run_method if ability else "POST")
    url = f"/abilities/{name}/run"
    if verb == "POST":
        return await client.post(url, json={"input": payload} if payload is not None else {})
    params = {"input": json.dumps(payload)} if payload is not None else None
    return await client.request(verb, url, params=params)
