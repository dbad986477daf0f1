"""`fleet demo`'s Python entry on a small fleet: a nightly run against an embedded emulator, ending in reports."""

from __future__ import annotations

from email import message_from_bytes
from pathlib import Path

import pytest

from cli.demo import run_demo
from fleet.model.summary import Outcome

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_demo_writes_summary_reports_and_messages(tmp_path: Path) -> None:
    first, second = run_demo(tmp_path, sites=8, seed=2, faults="realistic", time_scale=0.001, nights=2)

    result, summary = first, first.summary
    assert summary.items and summary.counts.by_outcome.get(Outcome.updated, 0) > 0
    assert sum(summary.counts.by_outcome.values()) == len(summary.items)
    names = {path.name for path in result.files}
    assert {"summary.json", "plan.json", "operator.html", "operator.txt", "operator.md", "operator.eml"} <= names
    client_reports = {summary_client.name for summary_client in summary.clients}
    assert client_reports and len([n for n in names if n.startswith("client-") and n.endswith(".eml")]) == len(
        client_reports
    )
    operator = message_from_bytes((result.run_dir / "operator.eml").read_bytes())
    assert operator["To"] == "operator@example.com"
    assert {part.get_content_type() for part in operator.walk()} >= {"text/plain", "text/html"}
    assert [night.gateway_timeouts for night in (first, second)] == [0, 0]  # on the emulator's clock alone
    probed = [site.check for site in summary.sites if site.updated]
    assert probed and all(check is not None and check.probe_ok is not None for check in probed)


    assert second.run_dir != first.run_dir and second.summary.run_id != summary.run_id
    applied = {(i.site_id, i.type, i.slug, i.to_version) for i in summary.items if i.outcome is Outcome.updated}
    assert not applied & {
        (i.site_id, i.type, i.slug, i.to_version) for i in second.summary.items if i.outcome is Outcome.updated
    }, "the second night applies nothing the first one did"
    assert "operator-outcomes-per-night.png" in {path.name for path in second.files}, "the trend over both nights"
