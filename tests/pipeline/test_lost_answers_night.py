"""No hold without evidence: a lost answer is re-read before a site is called broken. Over a real socket against the
emulator, whose gateway loses the answer of the night's check of a healthy site."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Outcome, Summary
from tests.pipeline.conftest import memory_of

pytestmark = pytest.mark.usefixtures("prefect_harness")


def healthy_site_with_plugin_updates(truth: dict) -> dict:
    return next(site for site in truth["sites"].values() if site["status"] == "connected" and site["reachable"]
                and any(u["type"] == "plugin" for u in site["pending_updates"]))


def night(site: dict, reports: Path) -> tuple[int, str, Summary]:
    result = CliRunner().invoke(app, ["nightly", "--sites", str(site["id"]), "--report-dir", str(reports)])
    [line] = [line for line in result.output.splitlines() if line.startswith("summary: ")]
    return result.exit_code, result.output, Summary.read(Path(line.removeprefix("summary: ")))


def checks_sent(emulator) -> int:
    return sum(n for call, n in emulator.truth()["request_counts"].items() if call.endswith("/check-sites-v1"))


@pytest.mark.parametrize("lost", [1, 2])
def test_a_check_whose_answer_was_lost_holds_nothing_and_the_night_exits_0(dashboard, tmp_path: Path, lost: int):
    emulator = dashboard(sites=12, seed=4)
    site = healthy_site_with_plugin_updates(emulator.truth())
    emulator.post("faults/lost-answers", {"call": "check-sites-v1", "times": lost})

    code, output, summary = night(site, tmp_path / "reports")

    assert code == 0, output
    assert emulator.truth()["faults"]["counts"]["answers_lost"] == lost
    assert checks_sent(emulator) == 2, "the check is re-run once, never more"
    assert summary.broken == [] and summary.holds == []
    assert memory_of().exists()
    [checked] = [s for s in summary.sites if s.site_id == site["id"]]
    assert checked.check.probe_ok is True  # the home page, probed directly, answered
    if lost == 2:  # never read: unverified, never broken
        assert "the check's answer was lost twice" in checked.check.unverified and checked.check.healthy
        operator = (tmp_path / "reports" / summary.run_id / "report" / "operator.txt").read_text()
        [line] = [line for line in operator.splitlines() if line.startswith(f"  - {checked.site_name} (")]
        assert "not verified" in line and "the check's answer was lost twice" in line
    else:
        assert checked.check.unverified is None and checked.check.online is True
    assert [i for i in summary.items if i.site_id == site["id"] and i.outcome is Outcome.updated]
    assert not [i for i in summary.items if i.suspect]
