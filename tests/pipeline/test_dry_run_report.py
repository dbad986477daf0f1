"""The dry run says what it would do: its summary and report lead with the updates it would apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.summary import Outcome, Selection
from flows.nightly import nightly_maintenance
from tests.pipeline.conftest import read_run

pytestmark = pytest.mark.usefixtures("prefect_harness")


async def test_a_dry_run_report_leads_with_what_it_would_apply(dashboard, monkeypatch):
    emulator = dashboard(sites=20, seed=8)
    monkeypatch.setenv("FLEET_REPORT_TO", "ops@example.com")
    before = emulator.writes()

    path = await nightly_maintenance(selection=Selection(), dry_run=True)

    assert emulator.writes() == before
    summary, plan = read_run(path)
    would = plan.to_apply()
    sites = {item.site_id for item in would}
    assert len(would) > 1 and len(sites) > 1
    assert [item.rule for item in summary.items[: len(would)]] == ["dry_run"] * len(would)  # first in the summary
    assert all(item.rule != "dry_run" for item in summary.items[len(would):])

    report = Path(path).parent / "report"
    text = (report / "operator.txt").read_text()
    headline = f"Would update {len(would)} of {len(summary.items)} items on {len(sites)} sites"
    assert headline in text
    assert text.index(headline) < text.index(f"Would update ({len(would)})") < text.index("Would not update, and why")
    first = would[0]
    assert f"{first.from_version} → {first.to_version}" in text
    html = (report / "operator.html").read_text()
    assert headline in html and html.index("Would update") < html.index("Would not update")
    # the operator gets the dry run's report (here as .eml: no SMTP host); clients never do
    assert {d.report for d in summary.deliveries} == {"operator"} and summary.deliveries[0].eml_path
    eml = (Path(path).parent / summary.deliveries[0].eml_path).read_text()
    assert f"(dry run): would update {len(would)}" in eml
    assert {item.outcome for item in summary.items[: len(would)]} == {Outcome.excluded}
