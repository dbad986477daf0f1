"""The capacity model over HTTP on a scaled clock: one PHP worker per request, the sites of a request one after
another, a FIFO queue past the workers, a cron chunk on one worker, the slow tail and the gateway's 504.

Wall times are checked only from below (a dashboard can never answer faster than the work booked on its workers);
everything else is read from the dashboard's own ledger, in modelled seconds, so that a busy machine cannot change an
outcome. Where two calls must meet on a worker, their work leaves about a second of wall time for the second to
arrive: CI once saw two calls sent together arrive 60 ms apart."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from emulator.capacity import Capacity
from emulator.clock import Clock
from emulator.config import EmulatorConfig
from tests.emulator.abilities_harness import ROOT_URL, Dashboard, dashboard, run

SCALE = 0.05  # a 2 s sync takes 100 ms of wall time
SYNC = 2.0 * SCALE
BOOT = 0.1 * SCALE


def config(**overrides: Any) -> EmulatorConfig:
    settings: dict[str, Any] = {"namespace": "svc", "sites": 40, "seed": 7, "time_scale": SCALE, "workers": 8,
                                "slow_site_rate": 0.0, "gateway_timeout": 0}
    return EmulatorConfig(**(settings | overrides))


@contextlib.asynccontextmanager
async def worker_model(settings: EmulatorConfig) -> AsyncIterator[Dashboard]:
    """The workers alone: MainWP's connection limits set to 0 (off), as `test_connection_limits` covers them."""
    async with dashboard(settings) as board:
        await set_connection_limits(board, 0, 0, 0, 0)
        yield board


async def set_connection_limits(board: Dashboard, requests: int, delay_ms: int, ip_requests: int,
                                ip_delay_ms: int) -> dict[str, Any]:
    """Through the dashboard's own settings screen (REST v2), as an operator sets them."""
    key = board.credentials["api_keys"]["read_write"]
    values = dict(zip(("maximum_requests", "minimum_delay", "maximum_ip_requests", "minimum_ip_delay"),
                      (requests, delay_ms, ip_requests, ip_delay_ms), strict=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL + "/wp-json/svc/v2",
                                 headers={"Authorization": f"Bearer {key}"}) as rest:
        answer = await rest.put("/settings/advanced/edit", json={f"svc_{k}": v for k, v in values.items()})
        assert answer.status_code == 200, answer.text
        return (await rest.get("/settings/advanced")).json()


async def timed_sync(client: httpx.AsyncClient, site_ids: list[int]) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    response = await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": site_ids})
    assert response.status_code == 200, response.text
    return time.monotonic() - started, response.json()


async def truth(board: Dashboard, site_ids: str = "0") -> dict[str, Any]:
    headers = {"X-Emulator-Token": board.emulator.config.admin_token.get_secret_value()}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL,
                                 headers=headers) as admin:
        return (await admin.get("/__emulator__/state", params={"site_ids": site_ids})).json()


async def settled(board: Dashboard) -> dict[str, Any]:
    """The ledger once every request, those answered 504 included, has done its work."""
    deadline = time.monotonic() + 30
    while (ledger := (await truth(board))["capacity"])["in_progress"] and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return ledger


def healthy(board: Dashboard, count: int) -> list[int]:
    """Sites a sync works on (reachable, connected, a recent child): their sync costs the modelled time."""
    state = board.emulator.state
    return [s.id for s in state.sites.values() if s.reachable and s.child_connected
            and s.offline_check_result != -1 and s.child_version.split(".")[0] >= "4"][:count]


async def test_an_immediate_call_works_its_sites_one_after_another() -> None:
    async with worker_model(config()) as board, board.client() as client:
        ids = healthy(board, 8)
        before = (await truth(board))["capacity"]
        one, _ = await timed_sync(client, ids[:1])
        eight, answer = await timed_sync(client, ids)
        ledger = (await truth(board))["capacity"]
    assert answer["total_synced"] == 8
    assert one >= (SYNC + BOOT) * 0.95
    assert eight >= (8 * SYNC + BOOT) * 0.95  # eight sites on ONE worker, although seven others are idle
    assert ledger["max_in_progress"] == 1 and ledger["operations"]["sync"] == 9
    # nine syncs and two bootstraps, nothing else booked
    assert ledger["modelled_seconds"] - before["modelled_seconds"] == pytest.approx(9 * 2.0 + 2 * 0.1)


async def test_parallel_one_site_calls_share_the_workers_in_fifo_order() -> None:
    scale = 0.25  # one call holds a worker 0.5 s of wall time: sixteen calls sent together all arrive within it
    one_call = (2.0 + 0.1) * scale
    async with worker_model(config(time_scale=scale)) as board, board.client() as client:
        ids = healthy(board, 16)

        async def parallel(count: int) -> float:
            started = time.monotonic()
            answers = await asyncio.gather(*(timed_sync(client, [site_id]) for site_id in ids[:count]))
            assert all(answer["total_synced"] == 1 for _, answer in answers)
            return time.monotonic() - started

        eight = await parallel(8)
        after_eight = (await truth(board))["capacity"]
        sixteen = await parallel(16)
        ledger = (await truth(board))["capacity"]
    # what the dashboard decided (its ledger, in modelled seconds), not how fast this machine ran it: eight calls
    # on eight workers, none waited; of sixteen, the last eight waited for a worker, and in FIFO order none waited
    # longer than one call's time (a call that arrived later than that would have found a worker free)
    assert after_eight["longest_queue_wait_seconds"] == 0 and after_eight["max_in_progress"] == 8
    assert ledger["max_in_progress"] == 16
    assert 0 < ledger["longest_queue_wait_seconds"] <= 2.0 + 0.1 + 1e-3
    # and never faster than the booked work (lower bounds hold on any machine)
    assert eight >= one_call * 0.95
    assert sixteen >= 2 * one_call * 0.95  # the second eight waited for a worker


async def test_a_slow_site_is_slow_on_every_call_and_listed() -> None:
    async with worker_model(config(sites=300, slow_site_rate=0.02, slow_site_factor=10.0)) as board, \
            board.client() as client:
        slow = set((await truth(board))["capacity"]["slow_sites"]["site_ids"])
        assert 1 <= len(slow) <= 15  # about 2% of 300
        state = board.emulator.state
        usable = healthy(board, 300)
        slow_site = next(s for s in usable if s in slow)
        quick_site = next(s for s in usable if s not in slow)
        before = (await truth(board))["capacity"]
        await timed_sync(client, [quick_site])
        slow_times = [(await timed_sync(client, [slow_site]))[0] for _ in range(2)]
        view = await truth(board, f"{slow_site},{quick_site}")
    assert view["sites"][str(slow_site)]["slow"] is True and view["sites"][str(quick_site)]["slow"] is False
    assert state.sites[slow_site].id == slow_site
    assert all(t >= 10 * SYNC * 0.95 for t in slow_times)
    # the quick site's sync and two of the slow one's, ten times as long: each call with its bootstrap
    booked = view["capacity"]["modelled_seconds"] - before["modelled_seconds"]
    assert booked == pytest.approx(2.0 + 2 * 10 * 2.0 + 3 * 0.1)


async def test_past_the_gateway_the_answer_is_a_504_and_the_updates_land_afterwards() -> None:
    async with worker_model(config(gateway_timeout=5.0)) as board, board.client() as client:
        state = board.emulator.state
        site = max((state.sites[i] for i in healthy(board, 40)), key=lambda s: len(state.pending_updates(s)))
        pending = len(state.pending_updates(site))
        assert pending * 3.0 > 2 * 5.0  # its updates take well past the 5 s gateway
        started = time.monotonic()
        response = await run(client, "svc/run-updates-v1", {"site_ids_or_domains": [site.id]})
        answered = time.monotonic() - started
        at_the_504 = await truth(board, str(site.id))
        listed_then = (await run(client, "svc/list-updates-v1", {"site_ids_or_domains": [site.id]})).json()
        await settled(board)
        landed = await truth(board, str(site.id))
        listed_after = (await run(client, "svc/list-updates-v1", {"site_ids_or_domains": [site.id]})).json()
    assert response.status_code == 504 and response.headers["content-type"].startswith("text/html")
    assert "504 Gateway Time-out" in response.text and "nginx" in response.text
    assert answered >= 5.0 * SCALE * 0.95
    assert at_the_504["capacity"]["gateway_timeouts"] == 1 and at_the_504["faults"]["counts"].get("errors", 0) == 0
    # at the timeout, not at the end of the work: its updates were still pending when the 504 came
    assert at_the_504["sites"][str(site.id)]["pending_updates"] and listed_then["total"] > 0
    assert landed["sites"][str(site.id)]["pending_updates"] == []
    assert listed_after["total"] == 0
    assert landed["capacity"]["operations"]["update_item"] == pending


async def test_the_queue_wait_counts_toward_the_gateway() -> None:
    """Two equal calls on one worker, each within the gateway alone: the one that waited for the other passes it,
    although it was sent a quarter of a second late (CI once saw two calls sent together arrive 60 ms apart: with
    one site each, that was enough for the second to find the worker free and answer 200)."""
    sites, late = 12, 0.25
    work = sites * 2.0 + 0.1  # modelled seconds of one call: 1.2 s of wall time
    gateway = work + 0.9  # the second passes it if it arrives less than 23.2 modelled seconds (1.16 s) after the first
    async with worker_model(config(workers=1, gateway_timeout=gateway)) as board, board.client() as client:
        ids = healthy(board, 2 * sites)
        assert len(ids) == 2 * sites
        first = asyncio.create_task(run(client, "svc/sync-sites-v1", {"site_ids_or_domains": ids[:sites]}))
        await asyncio.sleep(late)
        second = await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": ids[sites:]})
        ledger = await settled(board)
    assert [(await first).status_code, second.status_code] == [200, 504]
    assert ledger["gateway_timeouts"] == 1 and ledger["operations"]["sync"] == 2 * sites
    # it waited longer than its own work left of the gateway, and in FIFO order no longer than the first call's work
    # (how much less depends on when each call reached the dashboard, which a busy machine decides)
    assert gateway - work < ledger["longest_queue_wait_seconds"] <= work + 1e-3


@pytest.mark.parametrize(("workers", "waits_for_the_chunk"), [(1, True), (2, False)])
async def test_a_cron_chunk_holds_one_worker(workers: int, waits_for_the_chunk: bool) -> None:
    async with worker_model(config(workers=workers, sites=12)) as board, board.client() as client:
        board.set_option("abilities_batch_threshold", 3)
        ids = healthy(board, 7)
        queued = (await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": ids[:6]})).json()
        assert queued["queued"] is True
        board.emulator.clock.advance(60)  # the first chunk is due now
        deadline = time.monotonic() + 10
        while (await truth(board))["capacity"]["in_progress"] == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        during, _ = await timed_sync(client, ids[6:7])
        status = (await run(client, "svc/get-batch-job-status-v1", {"job_id": queued["job_id"]})).json()
        ledger = (await truth(board))["capacity"]
    assert ledger["max_in_progress"] == 2  # the chunk and the one-site call
    assert during >= (SYNC + BOOT) * 0.95
    if waits_for_the_chunk:  # one worker: the call waited until the chunk's six sites were done
        assert status["processed"] == 6
        assert ledger["longest_queue_wait_seconds"] > 0
    else:  # the chunk holds one worker; the call takes the other at once
        assert status["processed"] == 0
        assert ledger["longest_queue_wait_seconds"] == 0


async def test_a_request_cancelled_in_the_queue_leaves_it_cleanly() -> None:
    """A client gone while its request waits for a worker, just as the worker is handed past it."""
    capacity = Capacity(Clock(0.001), workers=1)
    release = asyncio.Event()

    async def holding() -> None:
        async with capacity.serving(bootstrap=False):
            await release.wait()

    async def waiting() -> None:
        async with capacity.serving(bootstrap=False):
            pass

    first = asyncio.create_task(holding())
    await asyncio.sleep(0)
    second = asyncio.create_task(waiting())
    await asyncio.sleep(0)
    assert capacity.snapshot()["queued"] == 1
    release.set()  # the worker is handed on before the cancelled request gets to run again
    second.cancel()
    await first
    with pytest.raises(asyncio.CancelledError):
        await second
    assert capacity.snapshot()["queued"] == 0 and capacity.in_progress == 0
    async with asyncio.timeout(1), capacity.serving(bootstrap=False):  # the worker is free again
        pass
