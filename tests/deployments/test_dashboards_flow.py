"""maintain-dashboards on the session's Prefect test server, for what must not start a night: an unknown block,
a dashboard whose night lock another night holds, a deployment the server does not have. A night that does run on
a work pool: tests/deployments/test_work_pool.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prefect.client.orchestration import PrefectClient, get_client
from prefect.concurrency.asyncio import concurrency

from dashboard.block import DashboardConnection
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.engine.estate import Estate, NightStatus, night_lock_name, write_limit_name
from flows.dashboards import maintain_dashboards
from tasks.limits import NightBusy, ensure_concurrency_limit, night_lock

pytestmark = pytest.mark.usefixtures("prefect_harness")


async def test_nights_that_cannot_start_are_reported_and_others_go_on(tmp_path: Path) -> None:
    async with EmulatorServer(EmulatorConfig(sites=3, seed=4, time_scale=0.001)) as server:
        credentials = server.credentials
        for block in ("flow-busy", "flow-missing-deployment"):
            await DashboardConnection(
                base_url=server.base_url, namespace=credentials["namespace"],
                api_key=credentials["api_keys"]["read_write"],
            ).save(block, overwrite=True)  # fmt: skip
        await ensure_concurrency_limit(night_lock_name("flow-busy"), 1)
        async with concurrency(night_lock_name("flow-busy"), occupy=1, strict=True):  # another night is running
            state = await maintain_dashboards(
                dashboards=["flow-busy", "flow-no-such-block", "flow-missing-deployment"],
                report_dir=str(tmp_path), deployment="no-such-flow/no-such-deployment", lock_wait_seconds=5,
                return_state=True,
            )  # fmt: skip
    assert state.is_failed() and "0 of 3 dashboards completed" in (state.message or "")
    estate = await state.result(raise_on_failure=False)
    assert isinstance(estate, Estate)
    nights = {night.block: night for night in estate.nights}
    assert nights["flow-busy"].status is NightStatus.busy
    assert night_lock_name("flow-busy") in (nights["flow-busy"].message or "")
    assert nights["flow-no-such-block"].status is NightStatus.not_started
    assert nights["flow-missing-deployment"].status is NightStatus.not_started
    assert "no-such-flow/no-such-deployment" in (nights["flow-missing-deployment"].message or "")
    assert all(night.flow_run_id is None for night in estate.nights), "no night was started"
    assert (tmp_path / "estate" / estate.run_id / "estate.html").is_file()

    async with get_client() as client:
        budget = await client.read_global_concurrency_limit_by_name(write_limit_name("flow-missing-deployment"))
        lock = await client.read_global_concurrency_limit_by_name(night_lock_name("flow-missing-deployment"))
    assert budget.limit == 8 and lock.limit == 1, "its own budget (FLEET_CONCURRENCY) and a one-night lock"


async def test_a_slow_prefect_server_is_waited_for_and_only_another_nights_lock_counts(monkeypatch) -> None:
    """Under load the server took longer to answer than the lock wait: no night held the lock, and it is taken."""
    await ensure_concurrency_limit(night_lock_name("slow-server"), 1)
    original = PrefectClient.increment_concurrency_slots_with_lease

    async def slow(self, *args, **kwargs):
        await asyncio.sleep(1.5)  # a starved server's answer
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(PrefectClient, "increment_concurrency_slots_with_lease", slow)
    async with night_lock("slow-server", 1.0):
        pass
    async with concurrency(night_lock_name("slow-server"), occupy=1, strict=True):  # another night holds it
        with pytest.raises(NightBusy):
            async with night_lock("slow-server", 1.0):
                pass
