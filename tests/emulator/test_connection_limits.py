"""MainWP's constraints on its calls to child sites (`MainWP_Connect::check_constraints`), over HTTP: the real
defaults on the advanced settings screen, each site's IP on its record, a sync that waits for the per-IP delay
between two sites of one server, at most `maximum_requests` calls open dashboard-wide, and the limits an operator
sets through `/settings/advanced` obeyed."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import httpx
import pytest

from emulator.config import EmulatorConfig
from tests.emulator.abilities_harness import ROOT_URL, Dashboard, dashboard, run
from tests.emulator.test_capacity import healthy, set_connection_limits, truth

SCALE = 0.01


def config() -> EmulatorConfig:
    return EmulatorConfig(namespace="svc", sites=40, seed=7, time_scale=SCALE, workers=8, slow_site_rate=0.0,
                          gateway_timeout=0, work_seconds={"sync": 0.2, "bootstrap": 0.0})


async def record_ips(board: Dashboard, site_ids: list[int]) -> dict[int, str]:
    key = board.credentials["api_keys"]["read"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL + "/wp-json/svc/v2",
                                 headers={"Authorization": f"Bearer {key}"}) as rest:
        return {i: (await rest.get(f"/sites/{i}")).json()["data"]["ip"] for i in site_ids}


async def sync(board: Dashboard, site_ids: list[int]) -> dict[str, Any]:
    async with board.client() as client:
        answer = await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": site_ids})
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_the_real_defaults_are_on_the_settings_screen_and_sites_share_servers() -> None:
    async with dashboard(config()) as board:
        ids = list(board.emulator.state.sites)
        ips = await record_ips(board, ids)
        ledger = (await truth(board))["capacity"]["child_connections"]
    per_server: dict[str, int] = defaultdict(int)
    for ip in ips.values():
        per_server[ip] += 1
    assert all(ip.startswith("10.20.") for ip in ips.values())
    assert 1 < len(per_server) < len(ids)  # several servers, most of them hosting more than one site
    assert ledger["limits"] == {"maximum_requests": 4, "minimum_delay_ms": 200, "maximum_ip_requests": 1,
                                "minimum_ip_delay_ms": 1000}


async def test_two_sites_of_one_server_wait_the_per_ip_delay_between_their_syncs() -> None:
    async with dashboard(config()) as board:
        ips = await record_ips(board, healthy(board, 40))
        first = next(i for i in ips if sum(ip == ips[i] for ip in ips.values()) > 1)
        pair = [first, next(i for i in ips if i != first and ips[i] == ips[first])]
        answer = await sync(board, pair)
        ledger = (await truth(board))["capacity"]["child_connections"]
    assert answer["total_synced"] == 2
    # the second call waited for 1 s after the first one started, less the first one's 0.2 s of work
    assert ledger["waited_seconds"]["minimum_ip_delay"] == pytest.approx(0.8, abs=0.05)
    assert ledger["max_open_per_ip"] == 1 and ledger["requests"] == 2
    assert ledger["lower_bound_seconds"] == pytest.approx(1.0)


async def test_many_parallel_syncs_keep_at_most_four_child_calls_open() -> None:
    """Six syncs sent at once, one site of its own server each, on MainWP's real sync time (2 s) and a clock at
    half speed: each call arrives well within the 100 ms of wall time that the 200 ms between two child calls
    take, so the dashboard spaces them (the arrivals' spread on a busy machine is milliseconds), and the fifth
    finds four calls open (the first ends 2 s after it started, 0.8 s after the fourth started)."""
    settings = config().model_copy(update={"time_scale": 0.5, "work_seconds": {"sync": 2.0, "bootstrap": 0.0}})
    async with dashboard(settings) as board:
        ips = await record_ips(board, healthy(board, 40))
        one_per_server = list({ip: i for i, ip in ips.items()}.values())
        assert len(one_per_server) >= 6
        answers = await asyncio.gather(*(sync(board, [i]) for i in one_per_server[:6]))
        ledger = (await truth(board))["capacity"]["child_connections"]
    assert all(a["total_synced"] == 1 for a in answers)
    assert ledger["max_open"] == 4 and ledger["max_open_per_ip"] == 1
    assert ledger["waited_seconds"]["minimum_delay"] > 0  # 200 ms between any two calls
    assert ledger["waited_seconds"]["maximum_requests"] > 0  # the fifth and sixth waited for a call to end


async def test_limits_set_on_the_settings_screen_are_obeyed() -> None:
    async with dashboard(config()) as board:
        settings = await set_connection_limits(board, 2, 0, 1, 0)
        ips = await record_ips(board, healthy(board, 40))
        first = next(i for i in ips if sum(ip == ips[i] for ip in ips.values()) > 1)
        pair = [first, next(i for i in ips if i != first and ips[i] == ips[first])]
        await sync(board, pair)
        ledger = (await truth(board))["capacity"]["child_connections"]
    assert (settings["data"]["svc_maximum_requests"], settings["data"]["svc_minimum_ip_delay"]) == (2, 0)
    assert ledger["limits"]["maximum_requests"] == 2 and ledger["limits"]["minimum_ip_delay_ms"] == 0
    assert ledger["waited_seconds"]["minimum_ip_delay"] == 0 and ledger["waited_seconds"]["minimum_delay"] == 0
