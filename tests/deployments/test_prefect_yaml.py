"""prefect.yaml describes the same night over many dashboards as `fleet deploy` registers, with entrypoints that
load (a broken one fails only on a worker, at night)."""

from __future__ import annotations

from pathlib import Path

import yaml
from prefect.flows import load_flow_from_entrypoint

from deployments.work_pool import FAN_OUT_DEPLOYMENT, POOL_DEPLOYMENTS, SECURITY_FAN_OUT_DEPLOYMENT
from flows.dashboards import NIGHT_DEPLOYMENT, SECURITY_DEPLOYMENT

ROOT = Path(__file__).resolve().parents[2]


def test_prefect_yaml_has_the_fan_outs_and_their_runs() -> None:
    described = {d["name"]: d for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]}
    for deployment in POOL_DEPLOYMENTS:
        entry = described[deployment.name]
        assert entry["entrypoint"] == deployment.entrypoint
        assert entry["work_pool"]["name"] == "fleet-maintenance"
        assert ("concurrency_limit" in entry) is deployment.one_at_a_time, "nights are kept apart by their lock"
        flow = load_flow_from_entrypoint(str(ROOT / deployment.entrypoint))
        assert f"{flow.name}/{deployment.name}" in {NIGHT_DEPLOYMENT, FAN_OUT_DEPLOYMENT, SECURITY_DEPLOYMENT,
                                                    SECURITY_FAN_OUT_DEPLOYMENT}
    assert [s["active"] for s in described["maintain-dashboards"]["schedules"]] == [False], "off until switched on"
    assert [(s["interval"], s["active"]) for s in described["patch-dashboards"]["schedules"]] == [(3600, False)]
    assert "schedules" not in described["dashboard-night"], "started by the fan-out only"
    assert "schedules" not in described["dashboard-security"], "started by the fan-out only"
