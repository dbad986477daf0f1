"""The night over many dashboards as deployments on a work pool, run from a checkout every worker can read.

`prefect deploy --all` (prefect.yaml) registers the same deployments with a pull step that clones the
repository; this registers them with the checkout's own path instead (one machine, or the same path mounted on
every worker), which is what `fleet deploy` and `fleet demo --dashboards` do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect import Flow

from deployments.serve import ONE_AT_A_TIME, TAGS
from flows.dashboards import NIGHT_DEPLOYMENT, SECURITY_DEPLOYMENT

FAN_OUT_DEPLOYMENT = "maintain-dashboards/maintain-dashboards"
SECURITY_FAN_OUT_DEPLOYMENT = "patch-dashboards/patch-dashboards"


@dataclass(frozen=True)
class PoolDeployment:
    entrypoint: str
    name: str
    description: str
    one_at_a_time: bool


POOL_DEPLOYMENTS = [
    PoolDeployment(
        "flows/nightly.py:nightly_maintenance", NIGHT_DEPLOYMENT.split("/")[1],
        "One dashboard's night, started by maintain-dashboards (its night lock keeps it to one at a time).",
        one_at_a_time=False,
    ),
    PoolDeployment(
        "flows/dashboards.py:maintain_dashboards", FAN_OUT_DEPLOYMENT.split("/")[1],
        "The night over every saved dashboard: one dashboard-night run each, one combined report.",
        one_at_a_time=True,
    ),
    PoolDeployment(
        "flows/security.py:patch_vulnerabilities", SECURITY_DEPLOYMENT.split("/")[1],
        "One dashboard's security run, started by patch-dashboards (it takes the dashboard's night lock itself).",
        one_at_a_time=False,
    ),
    PoolDeployment(
        "flows/dashboards.py:patch_dashboards", SECURITY_FAN_OUT_DEPLOYMENT.split("/")[1],
        "Between nights, every saved dashboard's security run: the fixes of known vulnerabilities, applied now.",
        one_at_a_time=True,
    ),
]  # fmt: skip


async def deploy_to_pool(source: Path, pool: str, job_variables: dict[str, Any] | None = None) -> list[UUID]:
    """Register the two fan-outs and their per-dashboard deployments on `pool`, running the code in `source`."""
    ids = []
    for deployment in POOL_DEPLOYMENTS:
        flow = await Flow.afrom_source(source=str(source.resolve()), entrypoint=deployment.entrypoint)
        ids.append(await flow.adeploy(
            name=deployment.name, work_pool_name=pool, job_variables=job_variables or {}, build=False, push=False,
            concurrency_limit=ONE_AT_A_TIME if deployment.one_at_a_time else None,
            description=deployment.description, tags=TAGS, print_next_steps=False,
        ))  # fmt: skip
    return ids
