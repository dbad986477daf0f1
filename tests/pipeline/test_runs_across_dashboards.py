"""The runs that meet between nights (issues 44 and 48), over HTTP against emulators: a night stopped on one
dashboard is never another dashboard's business, a site removed since is closed as such, a run killed with SIGKILL
while it held the dashboard's night lock stops no later night (from cron: the same Prefect home, a temporary
server each night), and its flow run is told as crashed."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from cli.demo import dashboard_environment
from cli.local_prefect import BLOCK_TYPES_REGISTERED
from dashboard.client import DashboardClient
from dashboard.errors import AuthenticationError
from fleet.engine.interrupted_runs import REMOVED
from fleet.engine.night import Night
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Outcome, Selection, Summary, UpdateType, run_directories
from fleet.pacing.call_sizing import CallSizer
from fleet.rules.breakage import SitesBrokenByRun
from fleet.state.job_journal import JobJournal
from flows.nightly import nightly_maintenance
from flows.sync import dashboard_memory
from orchestration.limits import night_lock
from tests.conftest import BLANK_DATABASE
from tests.local_http import LOCAL_HTTP
from tests.pipeline.conftest import read_run
from tests.pipeline.night_invariants import shared_plugin
from tests.prefect_home import start_from

pytestmark = pytest.mark.usefixtures("prefect_harness")
ROOT = Path(__file__).resolve().parents[2]


def use(monkeypatch: pytest.MonkeyPatch, board) -> None:
    """Point the FLEET_* environment at this emulated dashboard, as an operator's .env would."""
    for name, value in dashboard_environment(board.server.credentials).items():
        monkeypatch.setenv(name, value)


def stopped_after_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The night's second update call ends it (a revoked key: an error that stops the whole run), as a kill would:
    its run is left open in the journal, with the first call's items applied."""
    original = DashboardClient.run_updates
    calls = []

    async def once(self, *args, **kwargs):
        calls.append(args)
        if len(calls) > 1:
            raise AuthenticationError("the key was revoked", status=401)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(DashboardClient, "run_updates", once)


async def test_a_night_stopped_on_one_dashboard_is_no_business_of_another(dashboard, monkeypatch, tmp_path):
    """Issue 44: one FLEET_HOME, a night against dashboard A stopped mid-way, then nights against B: every night on
    B waited for A's run, tried to account for A's items on B and failed (`SiteNotFound: .../sites/46`)."""
    a = dashboard(sites=20, seed=9)
    truth = a.truth()
    far = sorted(int(site_id) for site_id, site in truth["sites"].items() if int(site_id) > 8
                 and site["status"] == "connected" and site["pending_updates"])[:4]  # ids dashboard B does not have
    monkeypatch.setenv("FLEET_SITES_PER_CALL", "1")  # one call per site: the second call stops the night
    tonight = Selection(sites=[str(site) for site in far], types=[UpdateType.plugin])
    with monkeypatch.context() as stopping:
        stopped_after_first_call(stopping)
        with pytest.raises(AuthenticationError):
            await nightly_maintenance(selection=tonight, send_report=False)
    [stopped] = [path for path in (tmp_path / "reports").iterdir() if path.is_dir() and path.name[0].isdigit()]

    b = dashboard(sites=4, seed=2)  # the same home, another dashboard
    summary, _ = read_run(await nightly_maintenance(send_report=False))
    assert summary.dashboard == b.server.base_url and summary.accounts_for == []
    assert not any(item.applied_by_run for item in summary.items)
    assert any("is new here" in error for error in summary.errors), "a second dashboard in the home is said"

    use(monkeypatch, a)  # back to A, with one of the stopped night's sites removed from it since
    key = a.server.credentials["api_keys"]["read_write"]
    LOCAL_HTTP.delete(f"{a.server.root_url}/wp-json/{a.server.config.namespace}/v2/sites/{far[0]}/remove",
                      headers={"Authorization": f"Bearer {key}"}).raise_for_status()
    still_there = Selection(sites=tonight.sites[1:], types=[UpdateType.plugin])
    summary, _ = read_run(await nightly_maintenance(selection=still_there, send_report=False))
    assert summary.accounts_for == [stopped.name]
    accounted = [item for item in summary.items if item.applied_by_run == stopped.name]
    gone = [item for item in accounted if item.site_id == far[0]]
    assert gone and all(item.outcome is Outcome.unknown and REMOVED in item.reason for item in gone)
    marked = Summary.read(stopped)
    assert marked.interrupted and marked.accounted_by == summary.run_id
    assert {(i.site_id, i.slug) for i in marked.items} == {(i.site_id, i.slug) for i in accounted}


async def test_a_release_a_stopped_night_left_fatal_at_load_goes_to_no_other_site(dashboard, monkeypatch, tmp_path):
    """Issue 44 (found by the generated nights): a night stopped after its write of a release that kills its site at
    load, before it probed the site, left the next night to account for it as `updated` and send it everywhere else.
    The next night judges that site before its first write: down, it is that release's break (an incident, a hold),
    and the release reaches no other site."""
    board = dashboard(sites=6, seed=11)
    slug, sites = shared_plugin(board.truth())
    for site in sites[:3]:
        board.post("offers", {"site_id": site, "type": "plugin", "slug": slug, "version": "100.1.0"})
        board.post("faults/items", {"site_id": site, "type": "plugin", "slug": slug, "mode": "load"})
    monkeypatch.setenv("FLEET_SITES_PER_CALL", "1")  # one call per site: the second call stops the night
    tonight = Selection(sites=[str(site) for site in sites[:3]], types=[UpdateType.plugin])
    with monkeypatch.context() as stopping:
        stopped_after_first_call(stopping)
        with pytest.raises(AuthenticationError):
            await nightly_maintenance(selection=tonight, send_report=False)
    [stopped] = [path for path in (tmp_path / "reports").iterdir() if path.is_dir() and path.name[0].isdigit()]
    [down] = [site for site in sites[:3] if board.truth()["sites"][str(site)]["front_end"]["status"] != "up"]

    with pytest.raises(SitesBrokenByRun) as failed:  # the night ends Failed: it accounts for a broken site
        await nightly_maintenance(selection=tonight, send_report=False)
    summary, _ = read_run(failed.value.summary_path)
    truth = board.truth()["sites"]
    got = [site for site in sites[:3] if truth[str(site)]["plugins"][slug]["version"] == "100.1.0"]
    assert got == [down], f"the release that killed site {down} was installed on {got}"
    [broken] = summary.broken
    assert broken.site_id == down and (slug, "100.1.0") in {(s.slug, s.to_version) for s in broken.suspects}
    assert ("plugin", slug, "100.1.0") in {(h.type.value, h.slug, h.version) for h in summary.holds}
    [item] = [item for item in summary.items if (item.site_id, item.slug) == (down, slug)]
    assert item.outcome is Outcome.updated and item.applied_by_run == stopped.name
    held = [item for item in summary.items if item.slug == slug and item.site_id != down]
    assert held and all(item.outcome is Outcome.held for item in held), held
    assert summary.incidents and summary.incidents[0].site_id == down


def fleet_nightly(env: dict[str, str], log: Path) -> subprocess.Popen:
    """`fleet nightly` as cron starts it: no PREFECT_API_URL (a temporary Prefect server of its own), its own
    process group (so that a kill takes its server with it)."""
    with log.open("a") as output:
        return subprocess.Popen([str(Path(sys.executable).parent / "fleet"), "nightly"], env=env, cwd=log.parent,
                                stdout=output, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.long(60)
async def test_a_night_killed_holding_the_lock_stops_no_later_night_from_cron(dashboard, tmp_path):
    """Issue 48: `fleet nightly` killed with SIGKILL mid-night, then `fleet nightly` again with the same
    PREFECT_HOME: the second never started its work (the killed night's Prefect concurrency slot, in the Prefect
    home's database, was never given back by the temporary servers)."""
    board = dashboard(sites=12, seed=9, time_scale=0.02)
    env = {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect-home"), "PYTHONPATH": str(ROOT),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "FLEET_SMTP_HOST": "",
            "FLEET_REPORT_TO": "ops@example.com"}  # the reports written as .eml files
    # the home's database as its first temporary server leaves it (migrated, block types registered), copied from
    # the run's blank one instead of made again: about 2.5 CPU-s
    start_from(Path(os.environ[BLANK_DATABASE]), tmp_path / "prefect-home" / "prefect.db")
    env |= BLOCK_TYPES_REGISTERED
    log = tmp_path / "nights.log"
    killed = fleet_nightly(env, log)
    try:
        deadline = time.monotonic() + 240
        while board.truth()["capacity"]["operations"].get("update_item", 0) < 4:
            assert killed.poll() is None, f"the night ended before it could be killed: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the night never started updating"
            time.sleep(0.05)
    finally:
        os.killpg(killed.pid, signal.SIGKILL)  # a reboot, an OOM kill: the night and its temporary server
        killed.wait()
    [killed_dir] = [path for path in (tmp_path / "reports").iterdir() if path.is_dir() and path.name[0].isdigit()]

    again = fleet_nightly(env, log)
    try:
        code = again.wait(timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the next night did not finish: {log.read_text()[-3000:]}")
    finally:
        if again.poll() is None:
            os.killpg(again.pid, signal.SIGKILL)
    assert code in (0, 7, 8), log.read_text()[-3000:]
    last = run_directories(tmp_path / "reports")[-1]
    assert Summary.read(last).accounts_for == [killed_dir.name], log.read_text()[-3000:]
    assert Summary.read(killed_dir).interrupted and Summary.read(killed_dir).accounted_by == last.name
    with sqlite3.connect(tmp_path / "prefect-home" / "prefect.db") as prefect_db:
        states = dict(prefect_db.execute("SELECT replace(id, '-', ''), state_type FROM flow_run").fetchall())
    [killed_state] = [state for run_id, state in states.items() if run_id.endswith(killed_dir.name[-8:])]
    assert killed_state == "CRASHED", "the killed night's flow run, left Running, is told as crashed"
    assert Summary.read(killed_dir).items, "what the killed night applied is in its summary now"


async def test_a_night_that_waits_out_its_bound_ends_in_one_line_and_alerts(dashboard, monkeypatch):
    """Issue 48: a night waited for the lock "as long as it takes", silently."""
    dashboard(sites=3, seed=2)
    monkeypatch.setenv("FLEET_NIGHT_LOCK_WAIT_SECONDS", "1")
    monkeypatch.setenv("FLEET_REPORT_TO", "ops@example.com")
    async with night_lock(dashboard_memory(None, PipelineSettings()), "security") as holder:  # a live holder
        result = await asyncio.to_thread(CliRunner().invoke, app, ["nightly"])
    assert result.exit_code == 10, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("nightly run failed: ")]
    assert f"held by security run {holder.run}" in line and "for 1 s" in line and "did not start" in line
    assert not list(Path(os.environ["FLEET_REPORT_DIR"]).glob("*/plan.json")), "no work was started"
    [alert] = (Path(os.environ["FLEET_REPORT_DIR"]) / "alerts").glob("alert-*.eml")
    assert "NightBusy" in alert.read_text() and holder.run in alert.read_text()


def test_a_killed_run_taken_over_by_runs_that_all_died_is_closed_unknown_not_passed_on(tmp_path: Path) -> None:
    """Issue 44: a run killed while accounting for another added itself to a list that grew with every night."""
    journal = JobJournal(tmp_path / "memory.sqlite")
    journal.start_run("killed", tmp_path / "killed")
    journal.intend("killed", "update", UpdateType.plugin, [(3, "akismet", "5.0", "5.1")])
    journal.leave("killed")
    for taker in ("second", "third", "fourth"):  # each took it over, and died itself before finishing
        night = Night(taker, CallSizer(20, 200, 200))
        [run] = [run for run in night.open(journal, tmp_path / taker, False, None, "https://d.example/wp-json")
                 if run.run_id == "killed"]
        assert not run.given_up and not night.notes
        journal.leave(taker)
    last = Night("fifth", CallSizer(20, 200, 200))
    runs = last.open(journal, tmp_path / "fifth", False, None, "https://d.example/wp-json")
    killed = next(run for run in runs if run.run_id == "killed")
    assert killed.given_up and any("killed is closed with its 1 item unknown" in note for note in last.notes)
    [item] = Summary.read(tmp_path / "killed").items
    assert item.outcome is Outcome.unknown and "not verified" in item.reason and item.applied_by_run == "killed"
    journal.leave("fifth")
    assert "killed" not in {run.run_id for run in journal.open_runs("sixth")}, "closed once, not passed on"
    assert {run.run_id for run in journal.open_runs("sixth")} == {"second", "third", "fourth", "fifth"}
