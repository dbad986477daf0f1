"""`fleet nightly`: runs the flow against the dashboard in the environment and says where the summary went."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleet.cli import app
from fleet.summary import Outcome, Summary, UpdateType


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
