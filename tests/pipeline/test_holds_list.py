"""`fleet holds list` reads at 80 columns: each item whole, as `fleet holds release` takes it; a long reason cut."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import NightHold, UpdateType
from fleet.state.holds import HoldStore

SAW = ("after the plugin updates: home page shows a PHP/WordPress error ('there has been a critical error on this "
       "website') with HTTP 500; after the plugin updates the site's pages fail and its MainWP Child does not answer "
       "(POST /wp-json/wp-abilities/v1/abilities/mainwp/deactivate-site-plugins-v1/run: Ability "
       '"mainwp/deactivate-site-plugins-v1" callback threw an exception: NOMAINWP) ') * 4


def test_a_hold_with_a_long_reason_is_a_few_lines_that_fit_80_columns(tmp_path: Path) -> None:
    store = HoldStore(tmp_path / "state.sqlite")
    item = "lab-canary-with-a-rather-long-folder-name/lab-canary-with-a-rather-long-folder-name.php"
    store.remember([NightHold(type=UpdateType.plugin, slug=item, name="Lab Canary", version="1.3.0",
                              reason=f"broke Lab Child One: {SAW}", site="https://child-one.lab.example/",
                              since=date(2026, 3, 9))])

    result = CliRunner().invoke(app, ["holds", "list", "--state-db", str(tmp_path / "state.sqlite")],
                                env={"COLUMNS": "80"})

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"plugin:{item}@1.3.0"  # whole, on its own line, as `fleet holds release` takes it
    assert all(len(line) <= 80 for line in lines[1:]), lines
    assert len(lines) <= 9 and lines[-1].startswith("1 hold;")
    assert any("Lab Canary · held as a culprit since 2026-03-09" in line for line in lines)
    assert any(line.strip().startswith("until: ends once") for line in lines)  # when it would end
    assert any(line.strip().startswith("site: https://child-one.lab.example/") for line in lines)
    why = [line for line in lines if "why: broke Lab Child One" in line]
    assert why and lines[lines.index(why[0]) + 1].rstrip().endswith("…")  # cut after its second line


def test_the_operators_own_holds_are_listed_with_the_nights(tmp_path: Path, monkeypatch) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text('holds:\n  - {item: woocommerce, reason: "peak season", expires: 2026-12-15}\n')
    monkeypatch.setenv("FLEET_POLICY_FILE", str(policy))

    result = CliRunner().invoke(app, ["holds", "list", "--state-db", str(tmp_path / "none.sqlite")])

    assert result.exit_code == 0, result.output
    assert "no version is held by the nights" in result.output
    assert "woocommerce · operator · until 2026-12-15: peak season" in result.output
