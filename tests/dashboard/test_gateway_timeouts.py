"""A gateway's 504 on a write is an unknown outcome and is never sent again, even for an ability marked
idempotent: the dashboard is still working on it (the emulator's gateway, over a real socket)."""

from __future__ import annotations

import asyncio

import pytest

from dashboard import DashboardClient
from dashboard.errors import OutcomeUnknown
from tests.dashboard.conftest import start_server
from tests.dashboard.emulated import FAST_RETRIES, GroundTruth


async def test_a_504_on_a_sync_is_not_retried_and_its_work_lands():
    # 6 sites of 2 modelled seconds on one worker pass a 5 s gateway
    with start_server(sites=12, seed=3, time_scale=0.01, gateway_timeout=5, slow_site_rate=0) as server:
        truth = GroundTruth(server)
        before = {site_id: site["last_sync"] for site_id, site in truth.state()["sites"].items()}
        async with DashboardClient.from_credentials(server.credentials, **FAST_RETRIES) as client:
            await client.get_ability("sync-sites-v1")  # the catalog read, before counting
            requests = truth.state()["capacity"]["requests"]
            with pytest.raises(OutcomeUnknown) as lost:
                await client.sync_sites([1, 2, 3, 4, 5, 6])
            assert lost.value.status == 504
            assert "HTTP 504: 504 Gateway Time-out" in str(lost.value)
            assert "<" not in str(lost.value) and "\n" not in str(lost.value), "the gateway page on one line"
            capacity = truth.state()["capacity"]
            assert capacity["gateway_timeouts"] == 1
            assert capacity["requests"] == requests + 1, "the 504 was not retried"
            answer = await client.get_site(1)  # a read still works while the sync goes on
            assert answer.id == 1
        await asyncio.sleep(0.2)  # the rest of the 12 modelled seconds
        after = truth.state()["sites"]
        assert all(after[str(site_id)]["last_sync"] > before[str(site_id)] for site_id in range(1, 7))
