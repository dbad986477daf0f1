"""The journal of runs and write calls: which runs count as interrupted, and what they sent."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from fleet.engine.interrupted import account_interrupted, steps_to_judge
from fleet.model.summary import Item, Outcome, UpdateType
from fleet.rules.plan import DetectedUpdate, SiteRecord, SiteStatus
from fleet.state.job_journal import Intent, JobJournal, OpenRun


def test_a_run_still_going_on_in_this_process_is_not_taken_for_an_interrupted_one(tmp_path: Path):
    journal = JobJournal(tmp_path / "state.sqlite")
    journal.start_run("night-1", tmp_path / "night-1")
    first = journal.intend("night-1", "update", UpdateType.plugin, [(4, "akismet", "5.0", "5.1")])
    second = journal.intend("night-1", "update", UpdateType.plugin, [(5, "akismet", "5.0", "5.1")])
    journal.answered(first)
    journal.flush()
    assert journal.open_runs("night-2") == [], "night-1 is live in this process"

    journal.leave("night-1")  # it failed, or its process would be gone
    (run,) = JobJournal(tmp_path / "state.sqlite").open_runs("night-2")
    assert run.run_id == "night-1" and run.run_dir == tmp_path / "night-1"
    assert [(intent.id, intent.answered, intent.site_ids) for intent in run.intents] == [
        (first, True, [4]), (second, False, [5])]
    assert run.intents[0].items == [(4, "akismet", "5.0", "5.1")]

    journal.accounted("night-1", "night-2")
    assert journal.open_runs("night-2") == []
    journal.close()


def test_a_run_whose_process_is_gone_is_interrupted_and_a_finished_one_is_not(tmp_path: Path):
    path = tmp_path / "state.sqlite"
    journal = JobJournal(path)
    journal.start_run("finished", tmp_path / "finished")
    journal.finish_run("finished")
    journal.leave("finished")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with sqlite3.connect(path) as connection:  # a run another process started and never finished
        host = connection.execute("SELECT host FROM runs").fetchone()[0]
        connection.execute("INSERT INTO runs (run_id, run_dir, started_at, host, pid) "
                           "VALUES ('killed', ?, '2026-11-23T01:00:00+00:00', ?, ?)",
                           (str(tmp_path / "killed"), host, int(gone.stdout)))
    assert [run.run_id for run in journal.open_runs("tonight")] == ["killed"]
    journal.close()


def test_an_item_a_killed_run_sent_to_a_site_tonight_cannot_sync_is_unknown_not_lost():
    sent = Intent(id=1, run_id="killed", kind="update", type=UpdateType.plugin, sent_at=datetime.now(UTC),
                  answered=False, items=[(1, "akismet", "5.0", "5.1"), (2, "akismet", "5.0", "5.1"),
                                         (2, "jetpack", "13.0", "13.1")])
    run = OpenRun(run_id="killed", run_dir=Path("."), started_at=datetime.now(UTC), intents=[sent])
    sites = {1: SiteRecord(id=1, url="https://one.example/", name="One"),
             2: SiteRecord(id=2, url="https://two.example/", name="Two", status=SiteStatus.offline,
                           status_reason="sync failed: Site is known to be offline.")}
    still = [DetectedUpdate(site_id=2, type=UpdateType.plugin, slug="jetpack", from_version="13.0")]
    items = {(item.site_id, item.slug): item for item in account_interrupted([run], sites, still)}
    assert set(items) == {(1, "akismet"), (2, "akismet")}, "an item still pending is not accounted"
    assert items[(1, "akismet")].outcome is Outcome.updated
    offline = items[(2, "akismet")]
    assert offline.outcome is Outcome.unknown and offline.applied_by_run == "killed"
    assert "known to be offline" in offline.reason and "could not be synced tonight" in offline.reason


def killed_run(name: str, *writes: tuple[int, str, str, str]) -> OpenRun:
    sent = Intent(id=1, run_id=name, kind="update", type=UpdateType.plugin, sent_at=datetime.now(UTC),
                  answered=False, items=list(writes))
    return OpenRun(run_id=name, run_dir=Path("."), started_at=datetime.now(UTC), intents=[sent])


def test_each_of_several_killed_runs_writes_to_one_item_is_its_own_item():
    """Found by the generated runs (three nights killed in a row, each after updating one plugin on the same
    sites): the next night reported only the first run's write of each item, `updated` to the version that run
    sent, and none of the later runs' writes. Each write now is an item of the run that sent it, landed when the
    next run found the item moved on from where that write started; a write the next run sent again did not land."""
    sites = {1: SiteRecord(id=1, url="https://one.example/", name="One")}
    runs = [killed_run("first", (1, "seo", "1.0", "1.1")), killed_run("second", (1, "seo", "1.1", "1.2")),
            killed_run("third", (1, "seo", "1.2", "1.3"))]
    items = account_interrupted(runs, sites, [])
    assert [(item.applied_by_run, item.from_version, item.to_version, item.outcome) for item in items] == [
        ("first", "1.0", "1.1", Outcome.updated), ("second", "1.1", "1.2", Outcome.updated),
        ("third", "1.2", "1.3", Outcome.updated)]
    resent = [killed_run("lost", (1, "seo", "1.0", "1.1")), killed_run("again", (1, "seo", "1.0", "1.1"))]
    assert [item.applied_by_run for item in account_interrupted(resent, sites, [])] == ["again"]
    still = [DetectedUpdate(site_id=1, type=UpdateType.plugin, slug="seo", from_version="1.1", to_version="1.2")]
    assert [(item.applied_by_run, item.to_version) for item in account_interrupted(runs[:2], sites, still)] == [
        ("first", "1.1")], "the last write still pending: the new run applies it as its own"
    judged = steps_to_judge(account_interrupted(runs, sites, []))[UpdateType.plugin]
    assert [(item.slug, item.to_version) for item in judged] == [("seo", "1.3")], "the site judged once, as it is"


def test_a_site_a_killed_run_wrote_to_is_judged_after_its_plugins_else_after_its_last_step():
    """What the next night blames a site found down on: the plugins sent it where any was (the step whose break
    can be contained and revived), else the last type sent; never an item the killed run did not land."""
    def item(site_id: int, type_: UpdateType, slug: str, outcome: Outcome) -> Item:
        return Item(site_id=site_id, site_url=f"https://{site_id}.example/", site_name=str(site_id), client=None,
                    type=type_, slug=slug, name=slug, from_version="1", to_version="2", outcome=outcome,
                    applied_by_run="killed")

    steps = steps_to_judge([
        item(1, UpdateType.translation, "fr", Outcome.updated), item(1, UpdateType.plugin, "seo", Outcome.unknown),
        item(1, UpdateType.theme, "blocksy", Outcome.updated), item(2, UpdateType.translation, "de", Outcome.updated),
        item(2, UpdateType.theme, "astra", Outcome.updated), item(3, UpdateType.plugin, "forms", Outcome.failed)])
    assert {step: [(i.site_id, i.slug) for i in items] for step, items in steps.items()} == {
        UpdateType.plugin: [(1, "seo")], UpdateType.theme: [(2, "astra")]}
