"""maintain-dashboards on the session's Prefect test server, for what must not start a night: an unknown block,
a dashboard whose night lock another night holds, a deployment the server does not have. A night that does run on
a work pool: tests/deployments/test_work_pool.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect.client.orchestration import get_client

from dashboard.block import DashboardConnection
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.engine.estate import Estate, NightStatus, write_limit_name
from fleet.model.settings import STATE_FILE
from fleet.state.dashboard_memory import DashboardMemory
from flows.dashboards import maintain_dashboards
from orchestration.limits import night_lock

pytestmark = pytest.mark.usefixtures("prefect_harness")


async def test_nights_that_cannot_start_are_reported_and_others_go_on(tmp_path: Path) -> None:
    async with EmulatorServer(EmulatorConfig(sites=3, seed=4, time_scale=0.001)) as server:
        credentials = server.credentials
        for block in ("flow-busy", "flow-missing-deployment"):
            await DashboardConnection(
                base_url=server.base_url, namespace=credentials["namespace"],
                api_key=credentials["api_keys"]["read_write"],
            ).save(block, overwrite=True)  # fmt: skip
        held = DashboardMemory(tmp_path / "flow-busy" / STATE_FILE, server.base_url)
        async with night_lock(held, "nightly") as holder:  # another night of flow-busy is running
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
    assert f"held by nightly run {holder.run}" in (nights["flow-busy"].message or "")
    assert nights["flow-no-such-block"].status is NightStatus.not_started
    assert nights["flow-missing-deployment"].status is NightStatus.not_started
    assert "no-such-flow/no-such-deployment" in (nights["flow-missing-deployment"].message or "")
    assert all(night.flow_run_id is None for night in estate.nights), "no night was started"
    assert (tmp_path / "estate" / estate.run_id / "estate.html").is_file()

    async with get_client() as client:
        budget = await client.read_global_concurrency_limit_by_name(write_limit_name("flow-missing-deployment"))
    assert budget.limit == 8, "its own budget (FLEET_CONCURRENCY)"
