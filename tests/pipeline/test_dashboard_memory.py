"""Each dashboard's memory in a folder of its own (issue 44): found by the dashboard's address whatever its scheme,
a second dashboard in the same home said once and kept apart, a home written before the split shared out on each
dashboard's first run, and a moved dashboard's memory kept with `fleet memory move`."""

from __future__ import annotations

import sqlite3
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Incident, NightHold, UpdateType
from fleet.state.dashboard_memory import DashboardMemory, DashboardMemoryError, dashboard_key, known_dashboards
from fleet.state.holds import HoldStore
from fleet.state.incidents import IncidentStore
from fleet.state.job_journal import JobJournal

A = "https://dash-a.example.com/wp-json"
B = "http://127.0.0.1:8080/wp-json"


def hold(slug: str) -> NightHold:
    return NightHold(type=UpdateType.plugin, slug=slug, name=slug, version="2.0", reason="broke a site", site="One",
                     since=date(2026, 11, 20))


def incident(dashboard: str, site_id: int) -> Incident:
    now = datetime(2026, 11, 27, 2, tzinfo=UTC)
    return Incident(dashboard=dashboard, site_id=site_id, site_url=f"https://site-{site_id}.example/",
                    site_name=f"Site {site_id}", opened_at=now, opened_by="20261127-020000-aaaaaaaa",
                    status="broken", last_look="pages answer 500")


def test_the_key_is_the_address_without_its_scheme() -> None:
    assert dashboard_key("https://Dash.Example.com/wp-json/") == "dash.example.com"
    assert dashboard_key("http://dash.example.com/wp-json") == "dash.example.com"  # http to https: one memory
    assert dashboard_key(B) == "127.0.0.1-8080"
    assert dashboard_key("https://example.com/agency/dashboard/wp-json") == "example.com-agency-dashboard"
    with pytest.raises(DashboardMemoryError, match="is not a dashboard address"):
        dashboard_key("not a url")


def test_a_second_dashboard_in_one_home_is_said_once_and_kept_apart(tmp_path: Path) -> None:
    home = tmp_path / "fleet-state.sqlite"
    a, b = DashboardMemory(home, A), DashboardMemory(home, B)
    assert a.open() == []  # the first dashboard of a new home: nothing to say
    HoldStore(a.path).remember([hold("akismet")])
    JobJournal(a.path).start_run("a-killed", tmp_path / "a-killed")
    [said] = b.open()
    assert f"keeps the memory of {A}" in said and f"{B} is new here" in said and str(b.folder) in said
    assert b.open() == [], "said once"
    assert HoldStore(b.path).active() == [] and JobJournal(b.path).open_runs("tonight") == []
    assert [h.slug for h in HoldStore(a.path).active()] == ["akismet"]
    assert known_dashboards(home) == [B, A]  # by folder name: 127.0.0.1-8080, dash-a.example.com


def test_a_home_from_before_the_split_gives_its_one_dashboard_everything(tmp_path: Path) -> None:
    home = tmp_path / "fleet-state.sqlite"
    HoldStore(home).remember([hold("akismet")])
    IncidentStore(home).save(incident(A, 3))
    journal = JobJournal(home)
    journal.start_run("killed", tmp_path / "killed")
    journal.intend("killed", "update", UpdateType.plugin, [(3, "akismet", "1.0", "2.0")])
    journal.leave("killed")  # it failed, or its process would be gone
    journal.close()
    a = DashboardMemory(home, A)
    [said] = a.open()
    assert f"the memory of {A} was taken from {home}" in said
    assert [h.slug for h in HoldStore(a.path).active()] == ["akismet"]
    assert [i.site_id for i in IncidentStore(a.path).open_incidents(A)] == [3]
    [killed] = JobJournal(a.path).open_runs("tonight")
    assert killed.run_id == "killed" and killed.intents[0].items == [(3, "akismet", "1.0", "2.0")]
    b = DashboardMemory(home, B)
    assert "is new here" in b.open()[0], "another dashboard takes nothing of it"
    assert HoldStore(b.path).active() == [] and JobJournal(b.path).open_runs("tonight") == []


def test_a_home_that_served_two_dashboards_gives_each_its_own_and_the_journal_to_none(tmp_path: Path) -> None:
    home = tmp_path / "fleet-state.sqlite"
    HoldStore(home).remember([hold("akismet")])
    store = IncidentStore(home)
    store.save(incident(A, 3))
    store.save(incident(B, 46))
    JobJournal(home).start_run("killed-somewhere", tmp_path / "killed")
    with sqlite3.connect(home) as db:
        db.execute("CREATE TABLE vuln_feed (id INTEGER PRIMARY KEY)")  # the feed's copy: the home's own
    a, b = DashboardMemory(home, A), DashboardMemory(home, B)
    [said] = a.open()
    assert "unaccounted for its 1 unfinished run (killed-somewhere)" in said and "127.0.0.1-8080" in said
    assert [i.site_id for i in IncidentStore(a.path).open_incidents(A)] == [3]
    assert JobJournal(a.path).open_runs("tonight") == []
    b.open()
    assert [i.site_id for i in IncidentStore(b.path).open_incidents(B)] == [46]
    assert [h.slug for h in HoldStore(b.path).active()] == ["akismet"], "a hold is kept rather than lost"
    with sqlite3.connect(b.path) as db:
        assert "vuln_feed" not in {row[0] for row in db.execute("SELECT name FROM sqlite_master")}


def test_a_changed_scheme_follows_and_a_moved_dashboard_keeps_its_memory(tmp_path: Path, fleet_home: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_STATE_DB", raising=False)
    home = fleet_home / "fleet-state.sqlite"
    old = DashboardMemory(home, "http://dash-a.example.com/wp-json")
    old.open()
    IncidentStore(old.path).save(incident("http://dash-a.example.com/wp-json", 3))
    [said] = DashboardMemory(home, A).open()  # the same dashboard, now over https
    assert "address changed from http://dash-a.example.com/wp-json to " + A in said
    assert [i.site_id for i in IncidentStore(old.path).open_incidents(A)] == [3]

    moved = CliRunner().invoke(app, ["memory", "move", A, "https://ops.agency.example/wp-json"])
    assert moved.exit_code == 0 and "now serves https://ops.agency.example/wp-json" in moved.output, moved.output
    new = DashboardMemory(home, "https://ops.agency.example/wp-json")
    assert [i.site_id for i in IncidentStore(new.path).open_incidents(new.base_url)] == [3]
    assert not old.folder.exists()
    listed = CliRunner().invoke(app, ["memory"])
    assert listed.exit_code == 0 and "https://ops.agency.example/wp-json" in listed.output and "1 dashboard" in \
        listed.output
    again = CliRunner().invoke(app, ["memory", "move", A, "https://ops.agency.example/wp-json"])
    assert again.exit_code == 2 and "no memory of" in again.output
    shown = CliRunner().invoke(app, ["incidents", "list"])  # the home's only dashboard, without FLEET_BASE_URL
    assert shown.exit_code == 0 and "Site 3" in shown.output, shown.output
