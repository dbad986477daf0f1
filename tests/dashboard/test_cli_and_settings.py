"""`fleet dashboard` against the emulator (tables, JSON, documented exit codes), and where settings come from:
environment, `.env`, a Prefect block, an in-process transport."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.app import app
from dashboard import DashboardClient, DashboardSettings
from dashboard.errors import ConfigurationError

runner = CliRunner()


def env_for(credentials: dict[str, Any], **changes: str) -> dict[str, str]:
    env = {
        "FLEET_BASE_URL": credentials["base_url"],
        "FLEET_NAMESPACE": credentials["namespace"],
        "FLEET_API_KEY": credentials["api_keys"]["read"],
        "FLEET_ABILITIES_USER": credentials["application_password"]["username"],
        "FLEET_ABILITIES_PASSWORD": credentials["application_password"]["password"],
        "FLEET_MAX_ATTEMPTS": "2",
        "FLEET_RETRY_INITIAL": "0.01",
    }
    env.update(changes)
    return env


def invoke(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], *args: str) -> Any:
    for name in list(env):
        monkeypatch.setenv(name, env[name])
    return runner.invoke(app, ["dashboard", *args])


def test_sites_table_and_json(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_for(emulator.credentials)
    table = invoke(monkeypatch, env, "sites")
    assert table.exit_code == 0, table.output
    assert "sites (30)" in table.output
    as_json = invoke(monkeypatch, env, "sites", "--json")
    assert as_json.exit_code == 0
    assert len(json.loads(as_json.stdout)) == 30


def test_updates_ignored_abilities_and_job(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_for(emulator.credentials)
    plugins = invoke(monkeypatch, env, "updates", "--type", "plugin", "--json")
    assert plugins.exit_code == 0, plugins.output
    assert {u["type"] for u in json.loads(plugins.stdout)} == {"plugin"}
    assert invoke(monkeypatch, env, "ignored").exit_code == 0
    abilities = invoke(monkeypatch, env, "abilities", "--json")
    assert abilities.exit_code == 0 and len(json.loads(abilities.stdout)) >= 60
    missing = invoke(monkeypatch, env, "job", "sync_00000000-0000-4000-8000-000000000000")
    assert missing.exit_code == 5 and "not found" in missing.output.lower()


def test_exit_codes(emulator: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    credentials = emulator.credentials
    wrong_key = invoke(monkeypatch, env_for(credentials, FLEET_API_KEY="0" * 40 + "==" + "1" * 40), "sites")
    assert wrong_key.exit_code == 3 and "0" * 40 not in wrong_key.output
    unreachable = invoke(monkeypatch, env_for(credentials, FLEET_BASE_URL="http://127.0.0.1:9/wp-json"), "sites")
    assert unreachable.exit_code == 4
    monkeypatch.delenv("FLEET_BASE_URL")
    assert runner.invoke(app, ["dashboard", "sites"]).exit_code == 2
    bad_type = invoke(monkeypatch, env_for(credentials), "updates", "--type", "nope")
    assert bad_type.exit_code == 2


def test_settings_from_environment_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("FLEET_BASE_URL=https://dash.example.com/wp-json/\nFLEET_API_KEY=s3cret==k3y\n")
    monkeypatch.setenv("FLEET_VERIFY_TLS", "false")
    monkeypatch.setenv("FLEET_NAMESPACE", "mainwp")
    settings = DashboardSettings()
    assert settings.base_url == "https://dash.example.com/wp-json" and settings.verify_tls is False
    assert settings.resolved_abilities_url == "https://dash.example.com/wp-json/wp-abilities/v1"
    assert "s3cret" not in repr(settings) and settings.api_key.get_secret_value() == "s3cret==k3y"
    monkeypatch.setenv("FLEET_NAMESPACE", "other")
    with pytest.raises(ConfigurationError, match=r"FLEET_NAMESPACE \(environment\): Input should be"):
        DashboardClient.from_env()
    monkeypatch.setenv("FLEET_NAMESPACE", "svc")
    monkeypatch.setenv("FLEET_ABILITIES_USER", "admin")
    with pytest.raises(ConfigurationError, match="given together"):
        DashboardClient.from_env()


async def test_prefect_block_builds_a_working_client(emulator: Any) -> None:
    from dashboard.block import DashboardConnection

    credentials = emulator.credentials
    block = DashboardConnection(
        base_url=credentials["base_url"], api_key=credentials["api_keys"]["read_write"],
        abilities_user=credentials["application_password"]["username"],
        abilities_password=credentials["application_password"]["password"], namespace=credentials["namespace"],
    )
    assert credentials["api_keys"]["read_write"] not in repr(block)
    async with DashboardClient.from_block(block) as dashboard:
        assert await dashboard.count_sites() == 30
        assert await dashboard.list_ignored_updates() is not None


async def test_in_process_transport() -> None:
    from emulator.config import EmulatorConfig
    from emulator.testing import InProcessEmulator

    inproc = InProcessEmulator(EmulatorConfig(namespace="mainwp", sites=3, seed=1))
    try:
        async with DashboardClient.from_credentials(inproc.credentials, transport=inproc.transport) as dashboard:
            assert len(await dashboard.list_sites()) == 3
    finally:
        inproc.close()


def test_job_wait_completes_or_exits_6(emulator: Any, truth: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = emulator.credentials["namespace"]
    env = env_for(emulator.credentials, FLEET_API_KEY=emulator.credentials["api_keys"]["read_write"])

    async def queue_two() -> tuple[str | None, str | None]:
        async with DashboardClient.from_credentials(emulator.credentials) as dashboard:
            done = await dashboard.check_sites([1, 2, 3])
            truth.faults({"stuck_job_rate": 1.0})
            stuck = await dashboard.check_sites([1, 2, 3])
        return done.job_id, stuck.job_id

    truth.options(**{f"{ns}_abilities_batch_threshold": 2})
    try:
        done, stuck = asyncio.run(queue_two())
        assert done and stuck
        finished = invoke(monkeypatch, env, "job", done, "--wait", "--deadline", "30", "--json")
        assert finished.exit_code == 0, finished.output
        assert json.loads(finished.stdout)["status"] == "completed"
        waited = invoke(monkeypatch, env, "job", stuck, "--wait", "--deadline", "0.5")
        assert waited.exit_code == 6 and stuck in waited.output
    finally:
        truth.faults("none")
        truth.options(**{f"{ns}_abilities_batch_threshold": 200})
