"""Prefect's own CLI works in the project's environment: operators live in it. With fastapi 0.151 or newer the
server refused the CLI's filters (`"limit": null`) with a 422, so every `ls` below failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.blocks.system import Secret
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.settings import PREFECT_API_URL

pytestmark = pytest.mark.usefixtures("prefect_harness")
PREFECT = Path(sys.executable).with_name("prefect")
SECRET = "cli-check-secret-value"


async def test_prefect_cli_lists_what_the_server_holds(tmp_path: Path) -> None:
    async with get_client() as client:
        flow_id = await client.create_flow_from_name("cli-check-flow")
        deployment_id = await client.create_deployment(flow_id=flow_id, name="cli-check-deployment")
        flow_run = await client.create_flow_run_from_deployment(deployment_id)
        await client.create_work_pool(WorkPoolCreate(name="cli-check-pool", type="process"), overwrite=True)
    await Secret(value=SECRET).save("cli-check-secret", overwrite=True)

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_HOME": str(tmp_path),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "250"}
    for command, listed in [
        (["deployment", "ls"], "cli-check-deployment"),
        (["block", "ls"], "cli-check-secret"),
        (["work-pool", "ls"], "cli-check-pool"),
        (["flow-run", "ls"], flow_run.name),
    ]:
        done = subprocess.run([str(PREFECT), *command], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"prefect {' '.join(command)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        assert listed in done.stdout, f"prefect {' '.join(command)} does not list {listed}: {done.stdout[-2000:]}"
        assert SECRET not in done.stdout + done.stderr
