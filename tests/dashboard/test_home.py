"""The service's home: the same settings and the same memory whatever directory a command starts in, and an
error that names the variable and the file it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.client import DashboardClient
from dashboard.errors import ConfigurationError
from dashboard.home import fleet_home, setting_source
from dashboard.settings import DashboardSettings
from fleet.model.settings import PipelineSettings


@pytest.fixture
def two_directories(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, Path]:
    """A user's state directory and two unrelated working directories; no FLEET_HOME set."""
    monkeypatch.delenv("FLEET_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in ("FLEET_BASE_URL", "FLEET_API_KEY", "FLEET_REPORT_DIR", "FLEET_STATE_DB", "FLEET_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)
    first, second = tmp_path / "here", tmp_path / "there"
    first.mkdir()
    second.mkdir()
    return first, second


def test_the_state_and_reports_live_in_the_home_whatever_the_working_directory(
    two_directories: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = []
    for directory in two_directories:
        monkeypatch.chdir(directory)
        settings = PipelineSettings()
        seen.append((fleet_home(), settings.home_state_path, settings.report_dir))
    home = tmp_path / "state" / "fleet-maintenance"
    assert seen == [(home, home / "fleet-state.sqlite", home / "reports")] * 2
    monkeypatch.setenv("FLEET_HOME", str(tmp_path / "srv" / "fleet"))
    assert PipelineSettings().home_state_path == tmp_path / "srv" / "fleet" / "fleet-state.sqlite"


def test_the_homes_env_file_is_read_from_anywhere_and_the_working_directorys_wins(
    two_directories: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    here, there = two_directories
    home = fleet_home()
    home.mkdir(parents=True)
    (home / ".env").write_text("FLEET_BASE_URL=https://home.example/wp-json\nFLEET_CONCURRENCY=3\n")
    (here / ".env").write_text("FLEET_CONCURRENCY=5\n")
    monkeypatch.chdir(there)
    assert DashboardSettings().base_url == "https://home.example/wp-json"
    assert PipelineSettings().concurrency == 3
    monkeypatch.chdir(here)
    assert PipelineSettings().concurrency == 5
    assert setting_source("FLEET_CONCURRENCY") == f"FLEET_CONCURRENCY in {here / '.env'}"
    assert setting_source("FLEET_BASE_URL") == f"FLEET_BASE_URL in {home / '.env'}"
    monkeypatch.setenv("FLEET_CONCURRENCY", "7")
    assert PipelineSettings().concurrency == 7
    assert setting_source("FLEET_CONCURRENCY") == "FLEET_CONCURRENCY (environment)"


def test_a_bad_setting_names_its_variable_and_the_file_it_came_from(
    two_directories: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    here, _ = two_directories
    monkeypatch.chdir(here)
    (here / ".env").write_text("FLEET_BASE_URL=dash.example.com\nFLEET_API_KEY=just-a-password\n")
    with pytest.raises(ConfigurationError) as raised:
        DashboardClient.from_env()
    message = str(raised.value)
    assert f"FLEET_BASE_URL in {here / '.env'}: must be an http(s) URL" in message
    assert f"FLEET_API_KEY in {here / '.env'}: is not a MainWP REST API key: a key reads <secret>==<key>" in message
    assert "just-a-password" not in message and "base_url" not in message


def test_a_setting_not_set_says_where_it_looked(two_directories: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
                                                ) -> None:
    here, _ = two_directories
    monkeypatch.chdir(here)
    with pytest.raises(ConfigurationError) as raised:
        DashboardClient.from_env()
    home = fleet_home()
    assert (f"FLEET_BASE_URL (not set: not in the environment, nor in {home / '.env'} (no such file) or "
            f"{here / '.env'} (no such file)): Field required") in str(raised.value)


def test_a_fleet_name_no_setting_reads_is_one_line_with_the_nearest_before_any_work(
    two_directories: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo in the home's `.env` or the environment stops every command at once, naming the known setting it is
    nearest to; a name only the service reads (the schedule) is known too."""
    from typer.testing import CliRunner

    from cli.app import app

    here, _ = two_directories
    monkeypatch.chdir(here)
    home = fleet_home()
    home.mkdir(parents=True)
    (home / ".env").write_text("FLEET_SMTP_HOTS=mail.example.com\nFLEET_SCHEDULE_CRON=0 3 * * *\n")
    monkeypatch.setenv("FLEET_KILL_SWITCH_SITE", "3")
    monkeypatch.setenv("FLEET_REPORT_DIR", str(here / "reports"))
    result = CliRunner().invoke(app, ["runs"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "fleet runs not started: FLEET_KILL_SWITCH_SITE (environment): not a setting: did you mean "
        f"FLEET_KILL_SWITCH_SITES?; FLEET_SMTP_HOTS in {home / '.env'}: not a setting: did you mean FLEET_SMTP_HOST?"]
    monkeypatch.delenv("FLEET_KILL_SWITCH_SITE")
    (home / ".env").write_text("FLEET_SMTP_HOST=mail.example.com\nFLEET_SCHEDULE_CRON=0 3 * * *\n")
    result = CliRunner().invoke(app, ["runs"])
    assert result.exit_code == 0 and "no run yet" in result.output, result.output


def test_every_settings_class_is_where_the_name_check_looks() -> None:
    """A settings class in a module the check does not import would make its names look like typos."""
    import importlib
    import pkgutil

    from cli.setting_names import SERVICE_SETTINGS_MODULES, SETTINGS_MODULES
    from dashboard.home import FleetSettings

    root = Path(__file__).resolve().parents[2]
    for package in ("cli", "dashboard", "deployments", "fleet", "flows", "orchestration", "reporting", "tasks",
                    "vulnfeed"):
        for module in pkgutil.walk_packages([str(root / package)], prefix=f"{package}."):
            importlib.import_module(module.name)
    classes, found = [FleetSettings], set()
    while classes:
        settings = classes.pop()
        classes += settings.__subclasses__()
        found.add(settings.__module__)
    assert found - {"dashboard.home"} <= set(SETTINGS_MODULES + SERVICE_SETTINGS_MODULES)
