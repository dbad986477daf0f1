"""Operations that install themselves, on one real `prefect server start` for the module: `fleet serve` creates its
automations (readable through Prefect's API, kept by name on a second start); a night it serves that breaks sites
sends its events, alerts a local webhook receiver through the FLEET_NOTIFY_BLOCK custom-webhook block, and trips
the kill switch, which pauses the nightly deployment; a night stuck past its deadline trips the proactive
automation; a notify block that is not saved stops `fleet serve` with one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.serve_stops import ChatReceiver as Receiver  # a local webhook receiver: what the block posted
from bench.serve_stops import save_chat_block
from cli.demo import dashboard_environment
from cli.local_prefect import LocalPrefectServer, command_path
from deployments.automations import KILL_SWITCH, NAMES, NIGHT_NOT_FINISHED, REPORTS_UNDELIVERED
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from tests.local_http import LOCAL_HTTP

NOTIFY = "custom-webhook/ops"
DEADLINE_SECONDS = 20
FAST = {"PREFECT_SERVER_SERVICES_LATE_RUNS_LOOP_SECONDS": "2", "PREFECT_SERVER_EVENTS_PROACTIVE_GRANULARITY": "PT2S"}


@dataclass
class World:
    server: LocalPrefectServer
    emulator: EmulatorServer
    webhook: Receiver
    root: Path

    def api(self, method: str, path: str, **body: Any) -> Any:
        read = method == "GET" or path.endswith("/filter")
        for attempt in range(3):  # a server on SQLite answers 500 now and then when busy ("database is locked")
            try:
                answer = LOCAL_HTTP.request(method, f"{self.server.api_url}{path}",
                                            json=None if method == "GET" else body)
            except httpx.TimeoutException:  # or, beside a busy suite, not within 30 s: a read is asked again
                if not read or attempt == 2:
                    raise
                continue
            if answer.status_code < 500:
                break
            time.sleep(1)
        assert answer.is_success, f"{method} {path}: {answer.status_code} {answer.text[:500]}"
        return answer.json() if answer.content else None

    def environment(self, **extra: str) -> dict[str, str]:
        return self.server.environment(
            COLUMNS="200", FLEET_HOME=str(self.root / "home"), FLEET_REPORT_DIR=str(self.root / "reports"),
            PREFECT_UI_URL=self.server.url, PREFECT_RUNNER_POLL_FREQUENCY="2",
            **dashboard_environment(self.emulator.credentials), **extra)

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = LOCAL_HTTP.request(method, f"{self.emulator.root_url}/__emulator__/{path}", json=body,
                                    headers={"x-emulator-token": self.emulator.config.admin_token.get_secret_value()})
        answer.raise_for_status()
        return answer.json() if answer.content else None


def wait_for(condition: Callable[[], Any], timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := condition()) and time.monotonic() < deadline:
        time.sleep(1)
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("automations")
    webhook = Receiver()
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    server = LocalPrefectServer(root / "prefect", dict(FAST))
    server.settings["PREFECT_UI_URL"] = server.url  # the links the automations' notifications carry
    try:
        with server, EmulatorServer(EmulatorConfig(sites=6, time_scale=0.001)) as emulator:
            world = World(server, emulator, webhook, root)
            save_chat_block(server, webhook)  # `custom-webhook/ops`, posting to the receiver
            yield world
    finally:
        webhook.shutdown()


@pytest.fixture(scope="module")
def served(world: World) -> Iterator[Callable[[], str]]:
    """`fleet serve` with the kill switch at more than 1 broken site and a 20 s deadline, as an operator starts
    it; yields a reader of what it printed so far."""
    output = world.root / "serve.log"
    env = world.environment(FLEET_NOTIFY_BLOCK=NOTIFY, FLEET_KILL_SWITCH_SITES="1",
                            FLEET_NIGHT_DEADLINE_HOURS=str(DEADLINE_SECONDS / 3600))
    with output.open("wb") as log:
        serving = subprocess.Popen([command_path("fleet"), "serve"], env=env, cwd=world.root, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    printed = lambda: output.read_text(errors="replace")  # noqa: E731
    try:
        assert wait_for(lambda: "serving nightly-maintenance/nightly" in printed() or serving.poll() is not None), \
            printed()
        assert serving.poll() is None, printed()
        yield printed
    finally:
        if serving.poll() is None:
            os.killpg(serving.pid, signal.SIGINT)
            try:
                serving.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(serving.pid, signal.SIGKILL)


def automations(world: World) -> dict[str, dict[str, Any]]:
    return {found["name"]: found for found in world.api("POST", "/automations/filter")}


def nightly_deployment(world: World) -> dict[str, Any]:
    return world.api("GET", "/deployments/name/nightly-maintenance/nightly")


def test_fleet_serve_creates_its_automations_readable_through_prefects_api_and_keeps_them_by_name(
    world: World, served: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from deployments.automations import ensure_automations

    for name in NAMES:
        assert f"automation {name!r} created" in served(), served()
    kept = automations(world)
    assert set(kept) == set(NAMES)
    [block] = world.api("POST", "/block_documents/filter", block_documents={"name": {"any_": ["ops"]}})
    kill = kept[KILL_SWITCH]
    assert kill["trigger"]["expect"] == ["fleet.site.broken"] and kill["trigger"]["threshold"] == 2
    assert [action["type"] for action in kill["actions"]] == ["send-notification", "pause-deployment"]
    assert kill["actions"][0]["block_document_id"] == block["id"]
    late = kept[NIGHT_NOT_FINISHED]["trigger"]
    assert late["posture"] == "Proactive" and late["within"] == DEADLINE_SECONDS

    # a second start updates them in place: the same automations, never a second copy
    import asyncio

    from prefect.settings import PREFECT_API_URL, temporary_settings

    for name, value in {"FLEET_NOTIFY_BLOCK": NOTIFY, "FLEET_KILL_SWITCH_SITES": "3",
                        "FLEET_NIGHT_DEADLINE_HOURS": str(DEADLINE_SECONDS / 3600)}.items():
        monkeypatch.setenv(name, value)
    with temporary_settings({PREFECT_API_URL: world.server.api_url}):
        lines = asyncio.run(ensure_automations())
    assert all(" updated: " in line for line in lines) and len(lines) == 3, lines
    again = automations(world)
    assert {name: found["id"] for name, found in again.items()} == {name: found["id"] for name, found in kept.items()}
    assert again[KILL_SWITCH]["trigger"]["threshold"] == 4
    # one turned off is deleted; the kill switch back as fleet serve keeps it, for the night below
    monkeypatch.setenv("FLEET_KILL_SWITCH_SITES", "1")
    monkeypatch.setenv("FLEET_UNDELIVERED_ALERT", "false")
    with temporary_settings({PREFECT_API_URL: world.server.api_url}):
        asyncio.run(ensure_automations())
    assert set(automations(world)) == set(NAMES) - {REPORTS_UNDELIVERED}
    assert automations(world)[KILL_SWITCH]["trigger"]["threshold"] == 2


def two_sites_to_break(world: World) -> list[tuple[int, str]]:
    """Two healthy sites each offered an update of an active plugin, and that plugin."""
    chosen = []
    for site in world.admin("GET", "state")["sites"].values():
        if site["status"] == "connected" and site["reachable"]:
            active = [u["slug"] for u in site["pending_updates"]
                      if u["type"] == "plugin" and site["plugins"][u["slug"]]["active"]]
            if active:
                chosen.append((site["id"], active[0]))
    assert len(chosen) >= 2, "the emulated fleet has fewer than two sites with an active plugin to update"
    return chosen[:2]


def fleet_events(world: World, run_id: str) -> list[dict[str, Any]]:
    found = world.api("POST", "/events/filter", filter={"event": {"prefix": ["fleet."]},
                                                        "related": {"id": [f"prefect.flow-run.{run_id}"]}},
                      limit=50)
    return found["events"]


@pytest.mark.long(20)
def test_a_night_that_breaks_sites_alerts_the_webhook_and_the_kill_switch_pauses_the_nightly_deployment(
    world: World, served: Callable[[], str]
) -> None:
    broken = two_sites_to_break(world)
    for site_id, slug in broken:
        world.admin("POST", "faults/items", {"site_id": site_id, "type": "plugin", "slug": slug, "mode": "break"})
    deployment = nightly_deployment(world)
    assert not deployment["paused"]
    run = world.api("POST", f"/deployments/{deployment['id']}/create_flow_run")

    def finished() -> dict[str, Any] | None:
        state = world.api("GET", f"/flow_runs/{run['id']}")["state"]
        return state if state and state["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

    state = wait_for(finished, timeout=300)
    assert state, f"the night did not finish in 300 s:\n{served()[-3000:]}"
    assert state["type"] == "FAILED" and "SitesBrokenByRun" in json.dumps(state), state

    # the events, each with its dashboard and site, and the run they came from
    wanted = {"fleet.site.broken", "fleet.night.finished", "fleet.reports.delivered"}

    def stored() -> list[dict[str, Any]] | None:  # the server stores events in batches
        found = fleet_events(world, run["id"])
        return found if wanted <= {event["event"] for event in found} else None

    events = wait_for(stored, timeout=60) or fleet_events(world, run["id"])
    names = [event["event"] for event in events]
    assert names.count("fleet.site.broken") == 2 and "fleet.night.finished" in names, names
    assert "fleet.reports.delivered" in names, names
    site_ids = {event["resource"]["fleet.site-id"] for event in events if event["event"] == "fleet.site.broken"}
    assert site_ids == {str(site_id) for site_id, _ in broken}
    finished_event = next(event for event in events if event["event"] == "fleet.night.finished")
    assert finished_event["payload"]["broken_sites"] == 2
    assert finished_event["resource"]["prefect.resource.id"].startswith("fleet.dashboard.127.0.0.1:")

    # the operator's channel: each break in one short text with the link to its run (the failed night repeats
    # none of them), and the kill switch
    link = f"{world.server.url}/runs/flow-run/{run['id']}"
    told = wait_for(lambda: [t for t in world.webhook.texts() if " broke after " in t or "is down, unreachable" in t]
                    if len([t for t in world.webhook.texts() if "kill switch" in t]) else None, timeout=60) or []
    assert len(told) == 2 and all(t.endswith(link) and "\n" not in t for t in told), world.webhook.texts()
    assert not [t for t in world.webhook.texts() if "ended Failed" in t], world.webhook.texts()
    kill = [t for t in world.webhook.texts() if "kill switch" in t]
    assert kill, world.webhook.texts()
    assert "more than 1 site broke within 1 h" in kill[0] and "The deployment nightly is paused" in kill[0]
    assert f"To resume once the cause is found: restart fleet serve (it switches its deployments on again), or " \
        f"switch the deployment on in the Prefect UI ({world.server.url}/deployments/deployment/" \
        f"{deployment['id']})" in kill[0] and kill[0].endswith(link)
    assert wait_for(lambda: nightly_deployment(world)["paused"], timeout=60), "the kill switch paused nothing"
    assert not failed_actions(world)


def failed_actions(world: World) -> list[dict[str, Any]]:
    """The automations' actions Prefect could not carry out (a template that does not render, a missing block)."""
    found = world.api("POST", "/events/filter", filter={"event": {"name": ["prefect.automation.action.failed"]}},
                      limit=50)
    return [{"reason": event["payload"].get("reason"), "automation": event["resource"].get("prefect.resource.name")}
            for event in found["events"]]


@pytest.mark.long(35)
def test_a_night_not_finished_by_its_deadline_trips_the_proactive_automation(
    world: World, served: Callable[[], str]
) -> None:
    """A run stuck in Pending (nobody runs it) is a night that does not finish: Prefect's server notices."""
    deployment = nightly_deployment(world)
    stuck = world.api("POST", f"/deployments/{deployment['id']}/create_flow_run",
                      state={"type": "PENDING", "name": "Pending"})
    said = wait_for(lambda: [t for t in world.webhook.texts() if f"nightly run {stuck['name']} has not finished" in t],
                    timeout=DEADLINE_SECONDS + 90)
    assert said, world.webhook.texts()
    assert f"has not finished {DEADLINE_SECONDS} s after its scheduled time" in said[0]
    assert "it is Pending" in said[0] and said[0].endswith(f"{world.server.url}/runs/flow-run/{stuck['id']}")
    assert not failed_actions(world)


def test_a_notify_block_that_is_not_saved_stops_fleet_serve_with_one_line(world: World) -> None:
    done = subprocess.run([command_path("fleet"), "serve"], env=world.environment(
        FLEET_NOTIFY_BLOCK="custom-webhook/nosuch"), cwd=world.root, capture_output=True, text=True, timeout=180)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("fleet serve not started")]
    assert line.startswith("fleet serve not started: FLEET_NOTIFY_BLOCK (environment): no saved Prefect block "
                           "'custom-webhook/nosuch'"), line
