"""A night that did nothing is not green: one whose sync job outlasted the sensor's deadline synced no site and
skipped every item, and it used to end Completed with no alert. Now it fails with its own exit code (9), says why
in the summary and the report, and alerts. Over real HTTP against the emulator."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Item, Outcome, SiteReport, Summary, UpdateType
from fleet.rules.empty_night import NightDidNothing, nothing_done
from fleet.rules.plan import Decision, Plan, PlanItem


@pytest.mark.usefixtures("prefect_harness")
def test_a_night_whose_sync_job_outlasts_the_deadline_fails_with_its_own_code_and_alerts(
    dashboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulator = dashboard(sites=8, seed=3)
    # the sync a queued batch job (one call of every site, above the dashboard's threshold of 2) that the
    # dashboard slows past the sensor's deadline (10 min on its clock)
    emulator.post("options", {"mainwp_abilities_batch_threshold": 2})
    emulator.post("faults", {"profile": {"slow_job_rate": 1.0}})
    for name, value in {"FLEET_BATCH_THRESHOLD": "1000000", "FLEET_CALL_BUDGET_SECONDS": "0",
                        "FLEET_SITES_PER_CALL": "1000", "FLEET_JOB_DEADLINE_SECONDS": "600",
                        "FLEET_REPORT_TO": "ops@example.com"}.items():
        monkeypatch.setenv(name, value)
    pending = sum(len(site["pending_updates"]) for site in emulator.truth()["sites"].values())

    result = CliRunner().invoke(app, ["nightly"])

    assert result.exit_code == 9, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("nightly run failed: ")]
    assert "did nothing: it synced none of the" in line
    [summary_line] = [line for line in result.output.splitlines() if line.startswith("summary: ")]
    summary = Summary.read(Path(summary_line.removeprefix("summary: ")))
    assert summary.did_nothing and summary.did_nothing in line
    assert pending and {item.outcome for item in summary.items} - {Outcome.ignored} == {Outcome.skipped}
    operator = (Path(summary_line.removeprefix("summary: ")).parent / "report" / "operator.html").read_text()
    assert "the night did nothing" in operator
    [alert] = (Path(os.environ["FLEET_REPORT_DIR"]) / "alerts").glob("alert-*.eml")
    assert "NightDidNothing" in alert.read_text() and "synced none" in alert.read_text()


def summary_of(*outcomes: Outcome, dry_run: bool = False, offline: int = 0) -> tuple[Summary, Plan]:
    now = datetime(2026, 11, 26, 2, tzinfo=UTC)
    items = [Item(site_id=n, site_url=f"https://s{n}.example", site_name=f"s{n}", type=UpdateType.plugin,
                  slug="akismet", name="Akismet", outcome=outcome, reason="sync failed: job timed out")
             for n, outcome in enumerate(outcomes)]
    plan = Plan(run_id="r", created_at=now, items=[
        PlanItem(site_id=n, type=UpdateType.plugin, slug="akismet", name="Akismet", decision=Decision.apply)
        for n in range(len(outcomes))])
    sites = [SiteReport(site_id=n, site_url="", site_name="", status="offline" if n < offline else "online")
             for n in range(len(outcomes))]
    return Summary(run_id="r", started_at=now, finished_at=now, dry_run=dry_run, items=items, sites=sites), plan


def test_the_verdict_survives_prefect_storing_it() -> None:
    import pickle

    ended = pickle.loads(pickle.dumps(NightDidNothing("run r did nothing: it synced none", "/r/summary.json")))  # noqa: S301
    assert str(ended) == "run r did nothing: it synced none" and ended.summary_path == "/r/summary.json"


def test_what_counts_as_a_night_that_did_nothing() -> None:
    summary, plan = summary_of(Outcome.skipped, Outcome.unknown)
    assert nothing_done(summary, plan, sync_asked=2, synced=1) == (
        "it attempted none of its 2 updates (2 of them: sync failed)")
    summary, plan = summary_of(Outcome.skipped, Outcome.skipped, offline=2)
    assert nothing_done(summary, plan, sync_asked=2, synced=0) == "it synced none of the 2 sites it had to sync " \
        "(2 offline)"
    assert nothing_done(*summary_of(Outcome.skipped, Outcome.updated), sync_asked=2, synced=2) is None
    assert nothing_done(*summary_of(Outcome.skipped, dry_run=True), sync_asked=0, synced=0) is None
    assert nothing_done(*summary_of(), sync_asked=3, synced=3) is None  # nothing to do is not nothing done
