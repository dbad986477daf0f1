"""The ground-truth view (`GET /__emulator__/state`): the capacity model's ledger, the jobs and the fault counters
next to the fleet, so a benchmark can compare its wall time with the modelled lower bound."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest
import typer
from pydantic import ValidationError

from cli.commands.emulator import parse_work_seconds
from emulator.capacity import DEFAULT_WORK_SECONDS
from emulator.config import EmulatorConfig
from emulator.testing import InProcessEmulator
from tests.emulator.abilities_harness import ROOT_URL, dashboard, run

NS = "/svc/v2"
CONFIG = EmulatorConfig(namespace="svc", sites=30, seed=5, time_scale=0.001, workers=4,
                        work_seconds={"sync": 3.0}, faults="realistic")


async def test_state_reports_capacity_jobs_and_fault_counters() -> None:
    async with dashboard(CONFIG) as board:
        board.set_option("abilities_batch_threshold", 10)
        headers = {"X-Emulator-Token": CONFIG.admin_token.get_secret_value()}
        async with board.client() as client, httpx.AsyncClient(
            transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL, headers=headers
        ) as admin:
            idle = (await admin.get("/__emulator__/state", params={"site_ids": "0"})).json()
            queued = (await run(client, "svc/sync-sites-v1", {})).json()
            deadline = time.monotonic() + 10
            while True:
                truth = (await admin.get("/__emulator__/state", params={"site_ids": "0"})).json()
                if truth["batch_jobs"][0]["status"] == "completed" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.005)
    assert idle["capacity"]["workers"] == 4 and idle["capacity"]["modelled_seconds"] == 0
    assert idle["capacity"]["work_seconds"] == {**DEFAULT_WORK_SECONDS, "sync": 3.0}
    assert idle["batch_jobs"] == [] and idle["jobs"] == 0
    assert truth["batch_jobs"] == [{"job_id": queued["job_id"], "type": "sync", "status": "completed",
                                    "progress": 100, "processed": 30, "total": 30}]
    capacity = truth["capacity"]
    # the queueing request (no site touched: bootstrap + read) and two cron chunks of 20 (a bootstrap each)
    assert capacity["operations"] == {"bootstrap": 3, "read": 1, "sync": 30}
    slow = capacity["slow_sites"]["site_ids"]
    work = 3.0 * (30 - len(slow)) + 3.0 * 10 * len(slow) + 3 * 0.1 + 0.05
    assert capacity["modelled_seconds"] == pytest.approx(work)
    # the bound is the workers' share of the work or what MainWP's connection limits allow, whichever is longer
    child = capacity["child_connections"]
    assert child["limits"] == {"maximum_requests": 4, "minimum_delay_ms": 200, "maximum_ip_requests": 1,
                               "minimum_ip_delay_ms": 1000}
    assert 0 < child["requests"] <= 30 and child["max_open"] <= 4 and child["max_open_per_ip"] == 1
    assert child["lower_bound_seconds"] > work / 4  # 30 syncs of 3 s over a few shared IPs, one at a time per IP
    assert capacity["lower_bound_wall_seconds"] == pytest.approx(child["lower_bound_seconds"] * 0.001, abs=1e-6)
    assert capacity["gateway_timeouts"] == 0 and capacity["max_in_progress"] >= 1
    faults = truth["faults"]
    assert faults["profile"] == "realistic"
    assert faults["counts"]["requests"] == 1  # the one dashboard request; ground truth is never faulted
    assert faults["counts"]["items_failing"] > 0 and "sites_offline" in faults["counts"]


@pytest.mark.parametrize(("method", "path", "body", "status", "words"), [
    ("GET", "/__emulator__/state?site_ids=one", None, 400, "site_ids"),
    ("POST", "/__emulator__/faults/items", b"{not json", 400, "JSON"),
    ("POST", "/__emulator__/faults/items", b"[1, 2]", 400, "JSON object"),
    ("POST", "/__emulator__/faults/items", {"site_id": 1, "type": "core", "slug": "x"}, 400, "type must be"),
    ("POST", "/__emulator__/faults/items", {"site_id": 999, "type": "plugin", "slug": "x"}, 404, "unknown site"),
    ("POST", "/__emulator__/faults/items", {"site_id": 1, "type": "wp", "slug": "wordpress", "mode": "loud"}, 400,
     "mode"),
    ("POST", "/__emulator__/faults/reachable", {"site_id": 1, "reachable": "no"}, 400, "reachable"),
    ("POST", "/__emulator__/offers", {"site_id": 1, "type": "wp", "slug": "wordpress", "version": 7}, 400,
     "version"),
    ("POST", "/__emulator__/options", {"no_such_option": 1}, 400, "unknown options"),
    ("POST", "/__emulator__/sites/add", {"url": "shop.example.com"}, 400, "url must be"),
    ("POST", "/__emulator__/sites/add", {"url": "https://shop.example.com", "client_id": 99}, 404, "unknown client"),
    ("POST", "/__emulator__/sites/add", {"url": "https://shop.example.com", "tag_ids": [99]}, 404, "tag_ids"),
    ("POST", "/__emulator__/sites/add", {"url": "https://shop.example.com", "name": ""}, 400, "non-empty"),
    ("PUT", "/__emulator__/faults", {"profile": 3}, 400, "profile"),
    ("PUT", "/__emulator__/faults", {"profile": {"error_rate": "lots"}}, 400, "error_rate"),
])
async def test_bad_input_to_ground_truth_routes_is_a_wordpress_style_4xx(method, path, body, status, words) -> None:
    async with dashboard(CONFIG.model_copy(update={"faults": "none"}), lifespan=False) as board:
        headers = {"X-Emulator-Token": CONFIG.admin_token.get_secret_value()}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL,
                                     headers=headers) as admin:
            content = body if isinstance(body, bytes) else None
            answer = await admin.request(method, path, content=content, json=None if content else body)
            refused = await admin.request(method, path, headers={"X-Emulator-Token": "wrong"})
    assert answer.status_code == status
    assert answer.json()["code"] == "emulator_bad_request" and answer.json()["data"] == {"status": status}
    assert words in answer.json()["message"]
    assert refused.status_code == 403 and refused.json()["code"] == "emulator_forbidden"


async def test_a_site_connected_to_the_dashboard_lists_its_own_updates_only_after_a_sync(
    lab: InProcessEmulator, rw: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    url = "https://orchard-physio.example.org/"
    added = await admin.post("/__emulator__/sites/add", json={"url": url.rstrip("/"), "name": "Orchard Physio",
                                                               "admin": "owner", "client_id": 2, "tag_ids": [1]})
    assert added.status_code == 200, added.text
    truth = added.json()
    site_id = int(truth["id"])
    assert site_id == 31 and truth["url"] == url and truth["last_sync"] == 0
    offered = {("plugin", slug, item["offer"]) for slug, item in truth["plugins"].items() if item["offer"]} | {
        ("theme", slug, item["offer"]) for slug, item in truth["themes"].items() if item["offer"]}
    assert offered, "the child runs plugins and themes of its own, some of them offered a release"
    assert truth["pending_updates"] == []  # the dashboard has stored nothing of the child yet

    def listed(data: list[dict]) -> set[tuple[str, str, str]]:
        return {(update["type"].rstrip("s"), update["slug"], update["new_version"]) for update in data
                if update["type"] in ("plugins", "themes", "plugin", "theme")}

    before = (await rw.get(f"{NS}/updates", params={"include": site_id})).json()["data"]
    record = (await rw.get(f"{NS}/sites/{site_id}")).json()["data"]
    assert before == [] and record["name"] == "Orchard Physio" and record["client_id"] == "2"
    assert (await rw.post(f"{NS}/sites/{site_id}/sync")).json()["success"] == 1
    after = (await rw.get(f"{NS}/updates", params={"include": site_id})).json()["data"]
    assert listed(after) == offered
    page = await admin.get("/__sites__/orchard-physio.example.org/")
    assert page.status_code == 200 and "<title>Orchard Physio</title>" in page.text
    again = await admin.post("/__emulator__/sites/add", json={"url": "http://orchard-physio.example.org"})
    assert again.status_code == 409 and "already connected" in again.json()["message"]
    assert len(lab.emulator.state.sites) == 31


@pytest.mark.parametrize(("work_seconds", "message"), [
    ({"nap": 1.0}, "unknown operations ['nap']"),
    ({"sync": -1.0}, "must not be negative: sync"),
])
def test_capacity_settings_say_what_is_wrong(work_seconds, message) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        EmulatorConfig(work_seconds=work_seconds)


def test_serve_reads_work_seconds_as_pairs() -> None:
    assert parse_work_seconds("sync=2, update_item=3.5") == {"sync": 2.0, "update_item": 3.5}
    assert parse_work_seconds("") == {}
    with pytest.raises(typer.BadParameter, match="'sync'"):
        parse_work_seconds("sync")
