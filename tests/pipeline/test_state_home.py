"""The nights' memory lives in one home, not in the working directory: a hold stored by a night started in one
directory is listed, and kept, by commands and nights started in another. A state database from before the home
is moved into it; an empty one where the last night left holds is said out loud."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.settings import PipelineSettings
from fleet.model.summary import NightHold, Outcome, Summary, UpdateType
from fleet.state.continuity import MOVED_SUFFIX, forgotten_holds
from fleet.state.holds import HoldStore
from tests.pipeline.test_broken_night import shared_plugin


def summary_path(output: str) -> Path:
    [line] = [line for line in output.splitlines() if line.startswith("summary: ")]
    return Path(line.removeprefix("summary: "))


@pytest.mark.usefixtures("prefect_harness")
def test_a_hold_stored_from_one_directory_is_kept_by_a_night_started_in_another(
    dashboard, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fleet_home: Path
) -> None:
    emulator = dashboard(sites=12, seed=4)
    monkeypatch.delenv("FLEET_REPORT_DIR")  # the default: the home's reports
    slug, version, offering = shared_plugin(emulator.truth())
    victim, later = offering[0], offering[1]
    emulator.post("faults/items", {"site_id": victim["id"], "type": "plugin", "slug": slug, "mode": "break"})
    first_dir, second_dir = tmp_path / "ops-shell", tmp_path / "elsewhere"
    first_dir.mkdir()
    second_dir.mkdir()

    monkeypatch.chdir(first_dir)
    first = CliRunner().invoke(app, ["nightly", "--sites", str(victim["id"])])
    assert first.exit_code == 7, first.output
    assert summary_path(first.output).is_relative_to(fleet_home / "reports")

    monkeypatch.chdir(second_dir)
    listed = CliRunner().invoke(app, ["holds", "list"])
    assert listed.exit_code == 0 and version in listed.output and "1 hold;" in listed.output, listed.output
    second = CliRunner().invoke(app, ["nightly", "--sites", str(later["id"])])
    assert second.exit_code == 0, second.output
    [item] = [item for item in Summary.read(summary_path(second.output)).items if item.slug == slug]
    assert item.outcome is Outcome.held and item.rule == "night_hold"
    assert any(u["slug"] == slug for u in emulator.truth()["sites"][str(later["id"])]["pending_updates"])
    assert not (first_dir / "reports").exists() and not (second_dir / "reports").exists()

    # day two, from a third directory: the history of the nights, and one of them in full
    monkeypatch.chdir(tmp_path)
    runs = CliRunner().invoke(app, ["runs"])
    assert runs.exit_code == 0, runs.output
    rows = [line.split() for line in runs.output.splitlines()[1:3]]
    assert [(row[0], row[1]) for row in rows] == [(summary_path(second.output).parent.name, "completed"),
                                                   (summary_path(first.output).parent.name, "broke")]
    assert max(len(line) for line in runs.output.splitlines()[:-1]) <= 80  # the table; then the path
    # a prefix of the run's name (its date, time and the id's first letters: two nights of one second, as here on
    # a quick machine, share the date and time, and `runs show` says a prefix of both is not enough)
    shown = CliRunner().invoke(app, ["runs", "show", summary_path(first.output).parent.name[:19]])
    assert shown.exit_code == 0 and ": broke 1" in shown.output.splitlines()[0], shown.output
    assert f"holds plugin:{slug}@{version}" in shown.output and "report:" in shown.output
    assert CliRunner().invoke(app, ["runs", "show", "nosuch"]).exit_code == 2


def test_fleet_version() -> None:
    from importlib.metadata import version

    shown = CliRunner().invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.startswith(f"fleet-maintenance {version('fleet-maintenance')} (")


def hold(slug: str = "woocommerce", version: str = "9.1.0") -> NightHold:
    return NightHold(type=UpdateType.plugin, slug=slug, name=slug, version=version, reason="broke Shop One",
                     site="Shop One", since=date(2026, 11, 20))


def test_a_state_database_beside_old_reports_moves_into_the_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fleet_home: Path
) -> None:
    monkeypatch.delenv("FLEET_REPORT_DIR", raising=False)
    monkeypatch.delenv("FLEET_STATE_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    legacy = tmp_path / "reports" / "fleet-state.sqlite"
    HoldStore(legacy).remember([hold()])

    listed = CliRunner().invoke(app, ["holds", "list"])

    assert listed.exit_code == 0, listed.output
    assert f"moved from {legacy}" in listed.output and "9.1.0" in listed.output
    assert not legacy.exists() and legacy.with_name(legacy.name + MOVED_SUFFIX).exists()
    assert [h.slug for h in HoldStore(fleet_home / "fleet-state.sqlite").active()] == ["woocommerce"]
    assert "moved" not in CliRunner().invoke(app, ["holds", "list"]).output  # once


def test_looking_at_holds_creates_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fleet_home: Path) -> None:
    monkeypatch.chdir(tmp_path)
    listed = CliRunner().invoke(app, ["holds", "list"])
    assert listed.exit_code == 0 and "no memory at" in listed.output and str(fleet_home) in listed.output
    assert not fleet_home.exists() and not (tmp_path / "reports").exists()


def test_an_empty_state_where_the_last_night_left_holds_is_said(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FLEET_STATE_DB", str(tmp_path / "new" / "fleet-state.sqlite"))
    dashboard = "https://dash.example.com/wp-json"
    settings = PipelineSettings(report_dir=tmp_path / "reports").with_memory(tmp_path / "new" / "dash.sqlite")
    now = datetime(2026, 11, 25, 2, tzinfo=UTC)
    Summary(run_id="20261125-020000-abcdef12", started_at=now, finished_at=now, dashboard=dashboard,
            holds=[hold()]).write(settings.report_dir / "20261125-020000-abcdef12")
    Summary(run_id="20261125-030000-abcdef13", started_at=now, finished_at=now, dashboard="https://other.example.com/"
            "wp-json").write(settings.report_dir / "20261125-030000-abcdef13")  # another dashboard's, later

    warning = forgotten_holds(settings, dashboard)

    assert ("is empty, but its last night (20261125-020000-abcdef12) held 1 version (woocommerce 9.1.0), not held "
            "now") in warning
    assert "FLEET_HOME or FLEET_STATE_DB" in warning
    assert forgotten_holds(settings, "https://other.example.com/wp-json") is None  # its last night held nothing
    HoldStore(settings.state_path).remember([hold()])
    assert forgotten_holds(settings, dashboard) is None
