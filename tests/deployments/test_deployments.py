"""The deployments as the Prefect UI sees them (their parameter schemas are the forms) and one manual trigger
of `update_fleet` through `run_deployment`, executed by a runner against an emulator on a real socket."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment
from prefect.runner import Runner

from cli.demo import dashboard_environment, environment
from deployments.serve import ScheduleSettings, build_deployments, ensure_concurrency_limit
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.model.summary import Outcome, Summary, UpdateType
from tests.local_http import LOCAL_HTTP

pytestmark = pytest.mark.usefixtures("prefect_harness")
TRUTH_TYPE = {UpdateType.core: "wp"}
TRUTH_KEY = {UpdateType.plugin: "plugins", UpdateType.theme: "themes", UpdateType.translation: "translations"}

FLOWS = {"nightly": "nightly-maintenance", "update_fleet": "update-fleet", "sync_fleet": "sync-fleet",
         "check_fleet": "check-fleet", "report": "report", "security": "security-patch"}


def test_schedule_settings_reject_bad_zone_and_cron() -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        ScheduleSettings(schedule_timezone="Mars/Olympus")
    with pytest.raises(ValueError, match="five fields"):
        ScheduleSettings(schedule_cron="every night")


async def test_deployments_register_with_schedule_and_limits() -> None:
    settings = ScheduleSettings(schedule_cron="30 3 * * 1-5", schedule_timezone="Europe/Berlin")
    for deployment in await build_deployments(settings):
        await deployment.aapply()
    async with get_client() as client:
        nightly = await client.read_deployment_by_name("nightly-maintenance/nightly")
        schedule = nightly.schedules[0].schedule
        assert (schedule.cron, schedule.timezone) == ("30 3 * * 1-5", "Europe/Berlin")
        assert nightly.global_concurrency_limit is not None and nightly.global_concurrency_limit.limit == 1
        for name, flow_name in FLOWS.items():
            deployment = await client.read_deployment_by_name(f"{flow_name}/{name}")
            assert deployment.description, name
            assert deployment.enforce_parameter_schema


async def test_the_security_deployment_runs_between_nights_on_its_own_schedule_or_not_at_all() -> None:
    hourly = next(d for d in await build_deployments(ScheduleSettings()) if d.name == "security")
    assert hourly.schedules[0].schedule.interval == timedelta(hours=1)
    assert hourly.concurrency_limit == 1
    settings = ScheduleSettings(security_cron="15 8-18 * * 1-5", schedule_timezone="Europe/Berlin")
    security = next(d for d in await build_deployments(settings) if d.name == "security")
    await security.aapply()
    async with get_client() as client:
        served = await client.read_deployment_by_name("security-patch/security")
    schedule = served.schedules[0].schedule
    assert (schedule.cron, schedule.timezone) == ("15 8-18 * * 1-5", "Europe/Berlin")
    assert settings.described("security") == "cron '15 8-18 * * 1-5' in Europe/Berlin"
    assert "security" not in {d.name for d in await build_deployments(ScheduleSettings(security_runs=False))}
    with pytest.raises(ValueError, match="five fields"):
        ScheduleSettings(security_cron="hourly")
    with pytest.raises(ValueError, match="greater than or equal to 30"):
        ScheduleSettings(security_interval_seconds=5)


async def _schema(name: str) -> dict:
    async with get_client() as client:
        return (await client.read_deployment_by_name(f"{FLOWS[name]}/{name}")).parameter_openapi_schema


def _resolve(schema: dict, node: dict) -> dict:
    if "$ref" in node:
        return schema["definitions"][node["$ref"].rsplit("/", 1)[-1]]
    for option in node.get("anyOf", []) + node.get("allOf", []):
        if "$ref" in option:
            return _resolve(schema, option)
    return node


async def test_every_parameter_renders_as_a_described_typed_field() -> None:
    for deployment in await build_deployments(ScheduleSettings()):
        await deployment.aapply()
    for name in FLOWS:
        schema = await _schema(name)
        assert schema["type"] == "object"
        for parameter, node in schema["properties"].items():
            assert node.get("description"), f"{name}.{parameter} has no description"
            assert "type" in node or "anyOf" in node or "$ref" in node or "allOf" in node, (name, parameter)
            assert parameter in schema.get("required", []) or "default" in node, f"{name}.{parameter}: no default"

    update = await _schema("update_fleet")
    assert update["properties"]["dry_run"]["type"] == "boolean"
    assert update["properties"]["dry_run"]["default"] is False
    selection = _resolve(update, update["properties"]["selection"])
    types = _resolve(update, selection["properties"]["types"]["items"])
    assert set(types["enum"]) == {t.value for t in UpdateType}
    assert update["properties"]["selection"]["default"]["types"] == [t.value for t in UpdateType]
    report = await _schema("report")
    assert "run_dir" in report.get("required", [])


async def test_concurrency_limit_is_created_once_and_kept() -> None:
    await ensure_concurrency_limit("fleet-test-limit", 3)
    await ensure_concurrency_limit("fleet-test-limit", 7)
    async with get_client() as client:
        limit = await client.read_global_concurrency_limit_by_name("fleet-test-limit")
    assert limit.limit == 3


async def test_manual_update_trigger_runs_against_the_emulator(tmp_path: Path) -> None:
    update = next(d for d in await build_deployments(ScheduleSettings()) if d.name == "update_fleet")
    config = EmulatorConfig(sites=6, seed=3, time_scale=0.001)
    async with EmulatorServer(config) as server:
        with environment(dashboard_environment(server.credentials)):
            runner = Runner(name="fleet-deployment-test", query_seconds=1, limit=1)
            await runner.aadd_deployment(update)
            serving = asyncio.create_task(runner.start())
            try:
                flow_run = await run_deployment(
                    "update-fleet/update_fleet", parameters={"report_dir": str(tmp_path)}, timeout=240
                )
            finally:
                await runner.astop()
                serving.cancel()
        truth = LOCAL_HTTP.get(
            f"{server.root_url}/__emulator__/state",
            headers={"X-Emulator-Token": server.credentials["admin_token"]},
        ).json()["sites"]
    assert flow_run.state is not None and flow_run.state.is_completed(), flow_run.state
    (summary_path,) = tmp_path.glob("*/summary.json")
    summary = Summary.read(summary_path)
    updated = [item for item in summary.items if item.outcome == Outcome.updated]
    assert updated, "a fleet with pending updates and no policy must update something"
    for item in updated:
        site = truth[str(item.site_id)]
        pending = {(u["type"], u["slug"]) for u in site["pending_updates"]}
        assert (TRUTH_TYPE.get(item.type, item.type.value), item.slug) not in pending, item
        if item.type != UpdateType.translation:  # language packs are listed without a target version
            record = site["wp"] if item.type == UpdateType.core else site[TRUTH_KEY[item.type]][item.slug]
            assert record["version"] == item.to_version, item
