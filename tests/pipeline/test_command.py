"""`fleet nightly`, `fleet update`, `fleet check`: run the flows against the dashboard in the environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Outcome, Summary, UpdateType


@pytest.mark.usefixtures("prefect_harness")
def test_fleet_nightly_dry_run_writes_a_complete_summary(dashboard, tmp_path: Path):
    emulator = dashboard(sites=12, seed=4)
    before = emulator.writes()
    result = CliRunner().invoke(app, ["nightly", "--dry-run", "--sites", "1,2", "--sites", "3", "--types", "plugin",
                                      "--report-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    path = Path(result.output.strip().splitlines()[-1].removeprefix("summary: "))
    assert path.is_file() and path.is_relative_to(tmp_path / "out")
    summary = Summary.read(path)
    assert summary.dry_run and summary.selection.sites == ["1", "2", "3"]
    assert summary.selection.types == [UpdateType.plugin]
    assert {site.site_id for site in summary.sites} == {1, 2, 3}
    assert all(item.outcome is not Outcome.updated for item in summary.items)
    assert emulator.writes() == before


def test_bad_policy_fails_before_any_request(tmp_path: Path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("holds:\n  - item: woocommerce\n")
    result = CliRunner().invoke(app, ["nightly", "--policy", str(policy)])
    assert result.exit_code == 2
    assert "holds.0.reason: Field required" in result.output


def test_unknown_type_is_refused():
    result = CliRunner().invoke(app, ["nightly", "--types", "gadget"])
    assert result.exit_code == 2
    assert "'gadget' is not a valid" in result.output


@pytest.mark.usefixtures("prefect_harness")
def test_fleet_update_then_check_a_selection(dashboard, tmp_path: Path, monkeypatch):
    emulator = dashboard(sites=10, seed=6)
    result = CliRunner().invoke(app, ["update", "--sites", "1,2,3", "--report-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("summary: ")]
    summary = Summary.read(Path(line.removeprefix("summary: ")))
    assert {site.site_id for site in summary.sites} == {1, 2, 3}
    truth = emulator.truth()["sites"]
    for item in summary.items:
        if item.outcome is Outcome.updated:
            assert (item.type.value if item.type is not UpdateType.core else "wp", item.slug) not in {
                (u["type"], u["slug"]) for u in truth[str(item.site_id)]["pending_updates"]
            }

    emulator.post("faults/front-end", {"site_id": 2, "broken": True})
    emulator.post("faults/reachable", {"site_id": 3, "reachable": False})
    monkeypatch.setenv("COLUMNS", "200")  # the table's width (rich)
    checked = CliRunner().invoke(app, ["check", "--sites", "1,2,3"])
    assert checked.exit_code == 1, checked.output  # site 2's front end shows a critical error, site 3 is down
    rows = {line.split("│")[1].strip(): line for line in checked.output.splitlines() if line.count("│") > 3}
    names = {site.site_id: site.site_name for site in summary.sites}
    assert "yes" in rows["1"] and names[1] in rows["1"]
    assert "NO" in rows["2"] and "PHP/WordPress" in rows["2"] and names[2] in rows["2"]
    assert "NO" in rows["3"] and "│ 503 " in rows["3"]  # the probe's HTTP status when the dashboard got none
    assert "3 sites checked: 1 healthy, 2 need attention, 0 open uptime alerts" in checked.output.splitlines()


def test_fleet_update_refuses_a_bad_policy_before_any_request(tmp_path: Path):
    policy = tmp_path / "policy.toml"
    policy.write_text('semver = "huge"\n')
    result = CliRunner().invoke(app, ["update", "--policy", str(policy)])
    assert result.exit_code == 2 and "semver" in result.output
