"""An emulated dashboard on a real socket, with the pipeline's environment pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.demo import dashboard_environment
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Summary, UpdateType
from fleet.rules.plan import Plan
from fleet.state.dashboard_memory import DashboardMemory
from tests.local_http import local_client

TRUTH_KEYS = {UpdateType.plugin: "plugins", UpdateType.theme: "themes", UpdateType.translation: "translations"}
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


class Dashboard:
    """The emulator under test, and its ground truth (what is really installed, requests seen)."""

    def __init__(self, server: EmulatorServer) -> None:
        self.server = server
        self.http = local_client(base_url=server.root_url,
                                 headers={"x-emulator-token": server.config.admin_token.get_secret_value()})

    def truth(self) -> dict[str, Any]:
        answer = self.http.get("/__emulator__/state")
        answer.raise_for_status()
        return answer.json()

    def post(self, path: str, body: dict[str, Any]) -> None:
        self.http.post(f"/__emulator__/{path}", json=body).raise_for_status()

    def set_connection_limits(self, **values: int) -> None:
        """MainWP's connection limits through its own settings screen (REST v2), e.g. `minimum_ip_delay=0`."""
        namespace = self.server.config.namespace
        key = self.server.credentials["api_keys"]["read_write"]
        answer = self.http.put(f"/wp-json/{namespace}/v2/settings/advanced/edit",
                               json={f"{namespace}_{name}": value for name, value in values.items()},
                               headers={"Authorization": f"Bearer {key}"})
        answer.raise_for_status()
        assert all(answer.json()["data"][f"{namespace}_{name}"] == v for name, v in values.items())

    def writes(self) -> dict[str, int]:
        return {call: n for call, n in self.truth()["request_counts"].items() if call.startswith(WRITE_METHODS)}


def memory_of(base_url: str | None = None, **settings: Any) -> Path:
    """The memory (holds, incidents, the journal) of the dashboard at `base_url` (default: FLEET_BASE_URL, the
    test's emulator) in the test's home."""
    import os

    return DashboardMemory(PipelineSettings(**settings).home_state_path,
                           base_url or os.environ["FLEET_BASE_URL"]).path


def installed(truth: dict[str, Any], site_id: int, type_: UpdateType, slug: str) -> str | None:
    site = truth["sites"][str(site_id)]
    if type_ is UpdateType.core:
        return site["wp"]["version"]
    entry = site[TRUTH_KEYS[type_]].get(slug)
    return entry["version"] if entry else None


def still_pending(truth: dict[str, Any], site_id: int, type_: UpdateType, slug: str) -> bool:
    kinds = ("core", "wp") if type_ is UpdateType.core else (type_.value, TRUTH_KEYS[type_])
    return any(u["slug"] == slug and u["type"] in kinds for u in truth["sites"][str(site_id)]["pending_updates"])


def read_run(path: str) -> tuple[Summary, Plan]:
    summary = Summary.read(Path(path))
    plan = Plan.model_validate_json((Path(path).parent / "plan.json").read_text())
    return summary, plan


@pytest.fixture
def dashboard(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """`dashboard(sites=60, time_scale=0.001, ...)` starts an emulator and points FLEET_* at it. Its gateway
    never times out unless a test asks for one: the present pipeline sends calls of up to 200 sites, which the
    real dashboard works one site after another, past nginx's 60 s (issue 11; the pipeline's answer is issue
    12's)."""
    servers: list[EmulatorServer] = []

    def start(**config: Any) -> Dashboard:
        config = {"time_scale": 0.001, **config}
        server = EmulatorServer(EmulatorConfig(**config)).start()
        servers.append(server)
        credentials = server.credentials
        env = {
            **dashboard_environment(credentials),  # the dashboard, and the sites' pages for the probe
            "FLEET_REPORT_DIR": str(tmp_path / "reports"),
            "FLEET_JOB_POLL_SECONDS": "0.05",
            "FLEET_STALL_AFTER_SECONDS": "5",
            "FLEET_RETRY_INITIAL": "0.01",
            "FLEET_RETRY_CAP": "0.05",
            # the night's time settings on the emulator's clock, from its credentials: the one knob
            "FLEET_TIME_SCALE": str(credentials["time_scale"]),
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return Dashboard(server)

    yield start
    for server in servers:
        server.stop()
