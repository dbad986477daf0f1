"""The promises that span runs, checked over generated sequences of every kind of run and fault.

`NightsMachine` is a Hypothesis rule-based state machine: an emulated dashboard on a real socket, one plugin that
several sites share, and rules that offer its releases (good, a front-end fatal, fatal at load, which on a site
where it is switched off is fatal only when switched on, a visual break seen only in the night's screenshots) to
some sites one night and to others later, and run the service between them: nights (the whole fleet, a selection,
a dry run, a lost answer, a site that cannot be synced, a blackout), a night killed with SIGKILL mid-way (after a
write, or while a write's answer is lost), an hourly security run after a vulnerability is published, a night
against a second dashboard in the same home, a site removed from the dashboard or added to it, the feed's setting
broken and corrected, the policy's windows changed (open, closed, on one client or all, in a zone whose day is
another), a window closing on work the dashboard has synced, a repair by hand, a hold released. Releases are drawn
from a `Bundle`, so a failing sequence names them. Each promise is an `@invariant()` checked after every step, from the
emulator's ground truth, the summaries, the dashboard's memory, `fleet runs` and the operator's report, and names
itself when it breaks. `test_night_invariants.py` runs a few sequences in CI; `bench/invariants.py` runs hundreds
and counts them. A failing sequence prints as Python that replays it as a plain test (`state = NightsMachine();
state.offer(...); ...`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import yaml
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)
from typer.testing import CliRunner

from cli.app import app
from cli.demo import dashboard_environment, feed_environment
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.model.summary import NOT_ATTEMPTED, Outcome, Summary
from fleet.model.wordpress_version import version_compare
from fleet.rules.plan import Plan
from fleet.rules.policy import parse_policy
from fleet.rules.windows import availability
from fleet.state.dashboard_memory import DashboardMemory
from fleet.state.holds import HoldStore
from fleet.state.incidents import IncidentStore
from fleet.visual.capture import chromium_path
from guard.signing import private_key, public_key_text
from tests.local_http import local_client
from tests.pipeline.guard_invariant import guarded_sites_left_down

ROOT = Path(__file__).resolve().parents[2]
# a front-end fatal; fatal at load (fatal only when switched on, where it is off); a stylesheet gone while the pages
# answer 200, seen only in the night's screenshots (the system Chromium: without it the kind is not drawn)
KINDS = ("good", "break", "load", "visual") if chromium_path() else ("good", "break", "load")
FAULTY = KINDS[1:]
WHICH = st.sets(st.integers(0, 5), min_size=1, max_size=3)  # some of the sites that share the plugin, by position
FAULT = {"good": None, "break": "break", "load": "load", "visual": None}
VISUAL = {"visual": {"sitemap_pages": 0, "viewports": ["desktop"], "baseline_gap_seconds": 0}}  # the home page
HELD_WITHOUT_EVIDENCE = 3  # nights a never-bad release may be withheld with no open incident naming it
WINDOWS = ("none", "client-open", "client-closed", "all-open", "all-closed")
ZONES = ("UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago")  # +14 and -11: another local day than UTC's, often
ZONE_INFO = {zone: ZoneInfo(zone) for zone in ZONES}
TRACKED = ("plugins", "themes")  # the installed versions whose every change a run must report
GUARD_KEY = "ZmxlZXQtaW52YXJpYW50cy1ndWFyZC1rZXktMzJieXQ="  # the home's Fleet Guard key (a fixed 32-byte seed)
GUARD_PUBLIC = public_key_text(private_key(GUARD_KEY))
# what the checks covered (read by bench/invariants.py): sequences, nights, releases that broke a site, items the
# nights' holds withheld, sites down at a night's end, and the runs between nights
STATS: dict[str, int] = {"sequences": 0, "nights": 0, "breaking releases": 0, "items withheld": 0, "sites down": 0,
                         "nights killed": 0, "security runs": 0, "other dashboard's nights": 0,
                         "deferrals checked": 0, "writes checked": 0, "guarded sites": 0}
VIOLATIONS: list[dict[str, Any]] = []  # each with its sequence and the promise it broke
SEQUENCES: list[list[str]] = []  # every sequence run, as its steps
RAISE = True  # CI fails at the first violation (Hypothesis shrinks and prints it); the bench counts them all


@dataclass
class Release:
    version: str
    kind: str
    broke: set[int] = field(default_factory=set)  # sites it broke (ground truth), and on which night first
    first_broke: int | None = None
    released_by_operator: bool = False  # the operator's word overrides the nights' memory


@dataclass
class Step:
    """What the last step did, as the invariants read it: a run of dashboard A (a night, a dry run, a security
    run, a killed night), a night of the second dashboard, or a change between runs (nothing ran)."""

    kind: str  # night, dry, security, killed, other, change
    before: dict | None = None
    after: dict | None = None
    summary: Summary | None = None
    plan: Plan | None = None
    code: int | None = None
    operator: str = ""
    new_dirs: list[Path] = field(default_factory=list)
    policy: dict = field(default_factory=dict)
    feed_right: bool = True  # FLEET_VULN_FEED pointed at the emulator's feed for this run
    fix: str | None = None  # a security run: the version published as the fix
    offered_fix: set[int] = field(default_factory=set)  # sites offered `fix` before the security run


class OutOfTime(Exception):  # noqa: N818 - it names what happened
    """The bench's time is up: no new sequence starts."""


class NightsMachine(RuleBasedStateMachine):
    """One dashboard over the service's runs, a second one beside it in the same home; every promise is checked
    after every step. A sequence shorter than `min_nights` nights ends with whole-fleet nights until it has them
    (the bench asks for 6)."""

    releases = Bundle("releases")  # the plugin's versions offered so far, of every kind
    good_releases = Bundle("good_releases")  # those a vulnerability can be fixed in
    min_nights = 0
    stop_at: float | None = None  # the bench's deadline (time.perf_counter()), after which no sequence starts
    timed_out = False

    def __init__(self) -> None:
        if self.stop_at is not None and time.perf_counter() > self.stop_at:
            NightsMachine.timed_out = True  # Hypothesis may report it as its own error (a shorter draw)
            raise OutOfTime
        super().__init__()
        self.home = Path(tempfile.mkdtemp(prefix="fleet-invariants-"))
        self.server = EmulatorServer(EmulatorConfig(sites=6, seed=11, time_scale=0.001)).start()
        self.other: EmulatorServer | None = None  # a second dashboard in the same home, started when drawn
        self.http = local_client(base_url=self.server.root_url,
                                 headers={"x-emulator-token": self.server.config.admin_token.get_secret_value()})
        credentials = self.server.credentials
        self.environment = {**dashboard_environment(credentials), **night_environment(self.home),
                            **feed_environment(credentials), "FLEET_GUARD_KEY": GUARD_KEY}
        self.saved = {name: os.environ.get(name) for name in self.environment}
        os.environ.update(self.environment)
        truth = self.truth()
        self.slug, self.sites = shared_plugin(truth)
        self.releases: dict[str, Release] = {}
        self.held_nights: dict[str, int] = {}  # version -> consecutive nights withheld without evidence
        self.night_number = 0
        self.added = 0  # sites the operator connected
        memory = DashboardMemory(self.home / "state.sqlite", self.server.base_url).path  # the dashboard's own
        self.holds = HoldStore(memory)
        self.incidents = IncidentStore(memory)
        self.windows, self.zone, self.security_windows = "none", "UTC", False
        self.clients: list[str] = []  # the dashboard's clients, from the first night's plan
        self.changes: Counter[tuple[int, str, str, str]] = Counter()  # installed versions the runs moved to
        self.killed: list[str] = []  # run ids of killed nights not yet accounted for
        self.fix: str | None = None  # the version the last published vulnerability is fixed in
        self.last: Step | None = None
        self.steps: list[str] = []
        SEQUENCES.append(self.steps)
        STATS["sequences"] += 1

    def step(self, text: str) -> None:
        self.steps.append(text)

    def teardown(self) -> None:
        try:
            while self.night_number < self.min_nights:
                self.step("a_night('whole', 0)  # to the sequence's least nights")
                self.night()
                self.check_all()
        finally:
            self.stop()

    def stop(self) -> None:
        self.http.close()
        self.server.stop()
        if self.other is not None:
            self.other.stop()
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(self.home, ignore_errors=True)

    # ---- the emulator ------------------------------------------------------------------------------------------

    def truth(self) -> dict[str, Any]:
        answer = self.http.get("/__emulator__/state")
        answer.raise_for_status()
        return answer.json()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.http.post(f"/__emulator__/{path}", json=body)
        answer.raise_for_status()
        return answer.json()

    # ---- rules: the fleet between runs -------------------------------------------------------------------------

    @initialize()
    def a_first_whole_fleet_night(self) -> None:
        """The fleet's own pending updates applied once, so that later nights are about the plugin's releases. No
        release of the plugin is offered yet, so none can break a page visually: this night takes no screenshots
        (every site shot before and after each step would add 15 s to every sequence)."""
        self.step("a_first_whole_fleet_night()")
        self.night(screenshots=False)
        self.clients = sorted({site.client for site in self.last.plan.sites if site.client})

    @rule(targets=(releases, good_releases), which=WHICH)
    def offer_a_good_release(self, which: set[int]) -> str:
        return self.offer("good", which)

    @rule(target=releases, kind=st.sampled_from(FAULTY), which=WHICH)
    def offer_a_faulty_release(self, kind: str, which: set[int]) -> str:
        return self.offer(kind, which)

    def offer(self, kind: str, which: set[int]) -> str:
        """A new release (newer than every one before) reaches some sites: each site's own clock offers it."""
        version = f"100.{len(self.releases) + 1}.0"
        self.step(f"offer({kind!r}, {sorted(which)!r})  # {version}")
        self.releases[version] = Release(version, kind)
        self.reach(version, which)
        self.last = Step("change")
        return version

    @rule(version=releases, which=WHICH)
    def offer_later(self, version: str, which: set[int]) -> None:
        """An earlier release reaches more sites nights later (their own update clocks, a window, a failed sync)."""
        self.step(f"offer_later({version!r}, {sorted(which)!r})")
        self.reach(version, which)
        self.last = Step("change")

    def reach(self, version: str, which: set[int]) -> None:
        """The sites `which` are offered `version`, with its fault: a visual break is marked on the version the
        site offers now, so it shows once that version is installed and switched on. A site already at `version`
        or past it is offered nothing (the emulator's offer would list it: the runs then "updated" a plugin to the
        version it had, or down to an older one, and reported a write twice; found by the 500-sequence run)."""
        kind = self.releases[version].kind
        sites = self.truth()["sites"]
        for index in sorted(which):
            site = self.sites[index % len(self.sites)]
            installed = ((sites.get(str(site)) or {}).get("plugins", {}).get(self.slug) or {}).get("version")
            if installed and version_compare(version, installed) <= 0:
                continue  # WordPress offers a plugin's update only above the version installed
            self.post("offers", {"site_id": site, "type": "plugin", "slug": self.slug, "version": version})
            self.post("faults/items", {"site_id": site, "type": "plugin", "slug": self.slug, "mode": FAULT[kind]})
            if kind == "visual":
                self.post("faults/visual", {"site_id": site, "type": "plugin", "slug": self.slug, "mode": "css"})

    @rule(pick=st.integers(0, 5))
    def repaired_by_hand(self, pick: int) -> None:
        """The operator renames the culprit's folder on a broken site (WordPress switches it off)."""
        self.step(f"repaired_by_hand({pick})")
        truth = self.truth()["sites"]
        down = [site for site in self.sites if truth[str(site)]["front_end"]["status"] != "up"]
        if down:
            self.post("sites/repair", {"site_id": down[pick % len(down)]})
        self.last = Step("change")

    @precondition(lambda self: bool(self.holds.active()))
    @rule(pick=st.integers(0, 5))
    def hold_released(self, pick: int) -> None:
        self.step(f"hold_released({pick})")
        holds = self.holds.active()
        hold = holds[pick % len(holds)]
        result = CliRunner().invoke(app, ["holds", "release", f"{hold.item}@{hold.version}"])
        assert result.exit_code == 0, result.output
        if hold.slug == self.slug and hold.version in self.releases:
            self.releases[hold.version].released_by_operator = True
        self.last = Step("change")

    @precondition(lambda self: self.added < 2)
    @rule()
    def a_site_added(self) -> None:
        self.step("a_site_added()")
        self.added += 1
        added = self.post("sites/add", {"url": f"https://added-{self.added}.example.org/"})
        if self.slug in added["plugins"]:
            self.sites.append(added["id"])
        self.last = Step("change")

    @rule(which=WHICH)
    def a_guard_installed(self, which: set[int]) -> None:
        """Fleet Guard installed on some sites (MainWP's bulk upload), built with the home's key: a release fatal at
        load on them is revived by the night."""
        chosen = sorted({self.sites[index % len(self.sites)] for index in which})
        self.step(f"a_guard_installed({sorted(which)!r})  # sites {chosen}")
        for site in chosen:
            self.post("guard", {"site_id": site, "armed": True, "keys": [GUARD_PUBLIC]})
        STATS["guarded sites"] += len(chosen)
        self.last = Step("change")

    @precondition(lambda self: len(self.sites) > 2)
    @rule(pick=st.integers(0, 5))
    def a_site_removed(self, pick: int) -> None:
        """The operator removes a site from the dashboard (perhaps one a killed night touched)."""
        site = self.sites[pick % len(self.sites)]
        self.step(f"a_site_removed({pick})  # site {site}")
        key = self.server.credentials["api_keys"]["read_write"]
        self.http.delete(f"/wp-json/{self.server.config.namespace}/v2/sites/{site}/remove",
                         headers={"Authorization": f"Bearer {key}"}).raise_for_status()
        self.sites.remove(site)
        self.last = Step("change")

    @rule(windows=st.sampled_from(WINDOWS), zone=st.sampled_from(ZONES), security_windows=st.booleans())
    def the_policy_changed(self, windows: str, zone: str, security_windows: bool) -> None:
        """The operator edits the policy's windows: open or closed now, for one client or all, in a zone whose day
        may be another than UTC's (a new window day); and whether fixes wait for them."""
        self.step(f"the_policy_changed({windows!r}, {zone!r}, {security_windows})")
        self.windows, self.zone, self.security_windows = windows, zone, security_windows
        self.last = Step("change")

    @rule(targets=(releases, good_releases), zone=st.sampled_from(ZONES), which=WHICH)
    def a_window_closes_on_offered_work(self, zone: str, which: set[int]) -> MultipleResults[str]:
        """Work the dashboard knows of when the sites' window closes: a good release offered and synced by the
        dashboard itself (its daily sync, an operator's click), then every window closed in `zone`, and the night
        defers it. A night syncs no site outside its window: a release offered while the windows are closed is not
        known to it, so without this rule 215 sequences checked no deferral."""
        version = self.offer("good", which)
        self.step(f"a_window_closes_on_offered_work({zone!r}, {sorted(which)!r})  # {version}")
        key = self.server.credentials["api_keys"]["read_write"]
        for site in sorted({self.sites[index % len(self.sites)] for index in which}):
            self.http.post(f"/wp-json/{self.server.config.namespace}/v2/sites/{site}/sync", timeout=60,
                           headers={"Authorization": f"Bearer {key}"}).raise_for_status()
        self.the_policy_changed("all-closed", zone, self.security_windows)
        self.night()
        return multiple(version)

    @rule(right=st.booleans())
    def the_feed_setting_changed(self, right: bool) -> None:
        """FLEET_VULN_FEED pointed at a wrong file, or corrected: the next run reads the new setting."""
        self.step(f"the_feed_setting_changed({right})")
        os.environ["FLEET_VULN_FEED"] = (self.server.credentials["vulnerability_feed"] if right
                                         else str(self.home / "no-such-feed.json"))
        self.last = Step("change")

    @rule(fix=good_releases)
    def a_vulnerability_published(self, fix: str) -> None:
        """The feed publishes a vulnerability in every version of the plugin below a good release, fixed by it."""
        self.step(f"a_vulnerability_published({fix!r})")
        major, minor, _ = fix.split(".")
        self.http.post("/__emulator__/vulnerabilities/publish", json={
            "type": "plugin", "slug": self.slug, "to_version": f"{major}.{int(minor) - 1}.999",
            "patched": [fix]}).raise_for_status()
        self.fix = fix
        self.last = Step("change")

    # ---- rules: the runs ---------------------------------------------------------------------------------------

    @rule(which=st.sampled_from(["whole", "selection", "dry"]), pick=st.integers(0, 5))
    def a_night(self, which: str, pick: int) -> None:
        self.step(f"a_night({which!r}, {pick})")
        if which == "whole":
            self.night()
        elif which == "selection":
            self.night(sites=[self.sites[pick % len(self.sites)]])
        else:
            self.night(dry_run=True)

    @rule(pick=st.integers(0, 5))
    def a_night_with_a_site_that_cannot_be_synced(self, pick: int) -> None:
        self.step(f"a_night_with_a_site_that_cannot_be_synced({pick})")
        site = self.sites[pick % len(self.sites)]
        self.post("faults/reachable", {"site_id": site, "reachable": False})
        try:
            self.night()
        finally:
            self.post("faults/reachable", {"site_id": site, "reachable": True})

    @rule()
    def a_night_in_a_blackout(self) -> None:
        """Every site's window closed tonight (a blackout): listed, never touched; not a whole-fleet listing."""
        self.step("a_night_in_a_blackout()")
        today = datetime.now(UTC).date().isoformat()
        self.night(blackout={"from": today, "to": today, "reason": "freeze"})

    @rule()
    def a_night_with_a_lost_answer(self) -> None:
        self.step("a_night_with_a_lost_answer()")
        self.post("faults/lost-answers", {"call": "sync-sites-v1", "times": 1})
        self.night()

    @rule(targets=(releases, good_releases), after=st.integers(1, 4), in_flight=st.booleans(), which=WHICH)
    def a_night_killed(self, after: int, in_flight: bool, which: set[int]) -> MultipleResults[str]:
        """`fleet nightly` killed with SIGKILL (a reboot, an OOM kill) once it applied `after` updates; `in_flight`:
        while the answer of an update call that did its work is lost (the night waits for the sites to be quiet).
        A fleet with fewer updates pending than `after` is offered a good release on the sites `which` first: a
        night with nothing to apply ends before it can be killed (of 215 sequences drawn without this, one killed)."""
        pending = sum(len(site["pending_updates"]) for site in self.truth()["sites"].values())
        version = f"100.{len(self.releases) + 1}.0"
        offered = pending < after
        self.step(f"a_night_killed({after}, {in_flight}, {sorted(which)!r})"
                  + (f"  # {pending} pending: good {version} offered first" if offered else ""))
        if offered:
            self.releases[version] = Release(version, "good")
            self.reach(version, which)
        self.kill_a_night(after, in_flight)
        return multiple(version) if offered else multiple()

    def kill_a_night(self, after: int, in_flight: bool) -> None:
        before = self.truth()
        if in_flight:
            self.post("faults/lost-answers", {"call": "run-updates-v1", "times": 1})
        dirs = set(self.run_dirs())
        # the test process's Prefect server: a killed night's flow run is left Running there, for the next to tell
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PREFECT_API_URL": prefect_api_url(),
               "PREFECT_LOGGING_LEVEL": "WARNING"}
        night = subprocess.Popen(
            [str(Path(sys.executable).parent / "fleet"), "nightly", "--report-dir", str(self.home / "reports"),
             "--policy", str(self.write_policy(True, None))],
            env=env, cwd=self.home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        applied = before["capacity"]["operations"].get("update_item", 0)
        deadline = time.monotonic() + 180
        while night.poll() is None and time.monotonic() < deadline:
            if self.truth()["capacity"]["operations"].get("update_item", 0) - applied >= after:
                break
            time.sleep(0.02)
        finished = night.poll() is not None  # it ended before it applied that many: a whole night
        if not finished:
            if in_flight:
                time.sleep(0.3)  # the lost answer's quiet wait has begun
            with contextlib.suppress(ProcessLookupError):
                os.killpg(night.pid, signal.SIGKILL)
        code = night.wait()
        self.post("faults/lost-answers", {"call": "run-updates-v1", "times": 0})
        new = [path for path in self.run_dirs() if path not in dirs]
        killed = [path.name for path in new if not (path / "summary.json").exists()]
        if finished and len(new) == 1 and not killed:
            summary = Summary.read(new[0])
            self.night_number += 1
            STATS["nights"] += 1
            self.last = Step("night", before=before, after=self.truth(), summary=summary, plan=read_plan(new[0]),
                             code=code, policy=self.policy(None), feed_right=self.feed_right(),
                             operator=(new[0] / "report" / "operator.txt").read_text())
            self.settled(summary)
            return
        self.killed += killed
        STATS["nights killed"] += bool(killed)
        self.last = Step("killed", before=before, after=self.truth(), new_dirs=new)

    @rule()
    def a_security_run(self) -> None:
        """The hourly security run: the fixes at or above the threshold on the sites offered one, nothing else."""
        from flows.security import patch_vulnerabilities

        self.step("a_security_run()")
        before = self.truth()
        fix = self.fix
        offered = {site for site in self.sites if any(
            u["slug"] == self.slug and u["new_version"] == fix for u in before["sites"][str(site)]["pending_updates"])}
        policy = self.write_policy(True, None)
        dirs = set(self.run_dirs(every=True))
        path = asyncio.run(run_quietly(patch_vulnerabilities(policy_file=str(policy), send_report=True)))
        STATS["security runs"] += 1
        summary = Summary.read(Path(path)) if path else None
        self.last = Step("security", before=before, after=self.truth(), summary=summary,
                         new_dirs=[p for p in self.run_dirs(every=True) if p not in dirs], policy=self.policy(None),
                         feed_right=self.feed_right(), fix=fix, offered_fix=offered,
                         plan=read_plan(Path(path).parent) if path else None)
        if summary is not None:
            self.settled(summary)

    @rule()
    def a_night_on_another_dashboard(self) -> None:
        """A night against a second dashboard from the same home (the rehearsal's emulator, or a client's own)."""
        self.step("a_night_on_another_dashboard()")
        if self.other is None:
            self.other = EmulatorServer(EmulatorConfig(sites=3, seed=5, time_scale=0.001)).start()
        dirs = set(self.run_dirs())
        policy = self.home / "other-policy.yaml"  # its own: A's client windows name clients it does not have
        policy.write_text(yaml.safe_dump({}))
        result = CliRunner().invoke(app, ["nightly", "--report-dir", str(self.home / "reports"), "--policy",
                                          str(policy)], env=dashboard_environment(self.other.credentials))
        STATS["other dashboard's nights"] += 1
        new = [path for path in self.run_dirs() if path not in dirs]
        summary = Summary.read(new[0]) if len(new) == 1 and (new[0] / "summary.json").exists() else None
        self.last = Step("other", summary=summary, code=result.exit_code, new_dirs=new,
                         operator=result.output[-2000:])

    # ---- a night of dashboard A --------------------------------------------------------------------------------

    def policy(self, blackout: dict[str, str] | None, screenshots: bool = True) -> dict:
        """The sequence's policy: the home page screenshotted where a visual break can be drawn, the windows drawn
        by `the_policy_changed`, and tonight's blackout."""
        policy: dict[str, Any] = {**(VISUAL if screenshots and "visual" in KINDS else {})}
        if blackout:
            policy["blackouts"] = [blackout]
        if self.windows != "none":
            now = datetime.now(ZONE_INFO[self.zone]).hour
            hours = (f"{(now - 1) % 24:02d}:00-{(now + 2) % 24:02d}:00" if self.windows.endswith("open")
                     else f"{(now + 3) % 24:02d}:00-{(now + 5) % 24:02d}:00")
            window = {"timezone": self.zone, "hours": hours}
            policy["windows"] = ({"default": window} if self.windows.startswith("all") or not self.clients
                                 else {"clients": {self.clients[0]: window}})
            policy["security"] = {"windows": self.security_windows}
        return policy

    def write_policy(self, screenshots: bool, blackout: dict[str, str] | None) -> Path:
        path = self.home / "policy.yaml"
        path.write_text(yaml.safe_dump(self.policy(blackout, screenshots)))
        return path

    def feed_right(self) -> bool:
        return os.environ.get("FLEET_VULN_FEED") == self.server.credentials["vulnerability_feed"]

    def run_dirs(self, every: bool = False) -> list[Path]:
        reports = self.home / "reports"
        found = sorted(path for path in reports.iterdir() if path.is_dir()) if reports.is_dir() else []
        return found if every else [path for path in found if path.name[:1].isdigit()]

    def night(self, sites: list[int] | None = None, dry_run: bool = False,
              blackout: dict[str, str] | None = None, screenshots: bool = True) -> None:
        """`fleet nightly` under the sequence's policy."""
        args = ["nightly", "--report-dir", str(self.home / "reports"), "--policy",
                str(self.write_policy(screenshots, blackout))]
        if sites:
            args += ["--sites", ",".join(map(str, sites))]
        if dry_run:
            args.append("--dry-run")
        before = self.truth()
        result = CliRunner().invoke(app, args)
        lines = [line for line in result.output.splitlines() if line.startswith("summary: ")]
        assert lines, f"the night wrote no summary (exit {result.exit_code}): {result.output[-2000:]}"
        path = Path(lines[0].removeprefix("summary: "))
        summary = Summary.read(path)
        self.night_number += 1
        STATS["nights"] += 1
        self.last = Step("dry" if dry_run else "night", before=before, after=self.truth(), summary=summary,
                         plan=read_plan(path.parent), code=result.exit_code, policy=self.policy(blackout),
                         operator=(path.parent / "report" / "operator.txt").read_text(), feed_right=self.feed_right())
        if not dry_run:
            self.settled(summary)

    def settled(self, summary: Summary) -> None:
        """A run of dashboard A that wrote: the killed nights it accounted for are no longer owed."""
        self.killed = [run for run in self.killed if run not in summary.accounts_for]

    # ---- the promises: each an invariant, checked after every step ---------------------------------------------

    def violated(self, promise: str, problems: list[str]) -> None:
        VIOLATIONS.extend({"night": self.night_number, "promise": promise, "violation": problem,
                           "sequence": list(self.steps)} for problem in problems)
        if RAISE:
            assert not problems, f"{promise}: " + "\n".join(problems)

    def check_all(self) -> None:
        """Every invariant at once (the least nights that end a sequence run outside Hypothesis's steps)."""
        for check in (self.a_bad_version_never_reaches_a_second_site, self.every_site_down_has_a_true_incident,
                      self.no_hold_without_evidence, self.exit_code_runs_and_reports_agree,
                      self.updated_means_moved, self.every_write_is_reported_once,
                      self.no_run_reads_another_dashboards_memory, self.every_deferral_is_true,
                      self.a_fix_reaches_every_site_allowed, self.a_run_that_applies_nothing_writes_nothing,
                      self.a_changed_feed_setting_is_read_at_once, self.no_site_whose_guard_answers_is_left_down):
            check()

    @invariant()
    def a_bad_version_never_reaches_a_second_site(self) -> None:
        """A release that broke a site on an earlier night is never installed on another site."""
        step = self.last
        if step is None or step.before is None or step.after is None:
            return
        before, after = step.before, step.after
        problems = []
        for site in self.sites:
            if str(site) not in before["sites"] or str(site) not in after["sites"]:
                continue
            was, now = self.version_on(before, site), self.version_on(after, site)
            release = self.releases.get(now or "")
            if now == was or release is None:
                continue
            if release.first_broke is not None and site not in release.broke and not release.released_by_operator:
                problems.append(f"{self.slug} {now} broke site(s) {sorted(release.broke)} on night "
                                f"{release.first_broke}, and was installed on site {site}")
        culprit = f"plugin:{self.slug}"
        said_broken = {a.site_id for a in step.summary.broken} if step.summary else set()
        for site in self.sites:
            if str(site) not in after["sites"]:
                continue
            state = after["sites"][str(site)]
            release = self.releases.get(self.version_on(after, site) or "")
            if release is None or release.kind == "good":
                continue
            if culprit in causes(state) and (broken(state) or site in said_broken):
                release.broke.add(site)
                if release.first_broke is None:
                    release.first_broke = self.night_number
                    STATS["breaking releases"] += 1
        self.violated("a bad version never reaches a second site", problems)

    def version_on(self, truth: dict, site: int) -> str | None:
        plugin = truth["sites"][str(site)]["plugins"].get(self.slug)
        return plugin["version"] if plugin else None

    @invariant()
    def every_site_down_has_a_true_incident(self) -> None:
        """Every site down or broken at a run's end has an open incident whose culprit, version and what is switched
        off match the ground truth; no open incident says a plugin is off that is on."""
        step = self.last
        if step is None or step.kind not in ("night", "security") or step.summary is None:
            return
        after, problems = step.after, []
        incidents = {i.site_id: i for i in self.incidents.open_incidents()}
        for site in self.sites:
            if str(site) not in after["sites"]:
                continue
            state = after["sites"][str(site)]
            plugin = state["plugins"].get(self.slug) or {}
            incident = incidents.get(site)
            if broken(state) and state["reachable"]:
                STATS["sites down"] += 1
                if incident is None:
                    problems.append(f"site {site} is {broken(state)} with no open incident")
                    continue
                version = plugin.get("version")
                named = {s.to_version for s in incident.suspects if s.slug == self.slug}
                if incident.culprit is not None:
                    named = {incident.culprit.to_version} if incident.culprit.slug == self.slug else set()
                if f"plugin:{self.slug}" in causes(state) and version not in named:
                    problems.append(f"site {site} is broken by {self.slug} {version}; its incident {incident.id} "
                                    f"names {sorted(v or '?' for v in named)}")
                if state["front_end"]["dead_at_load"] and not incident.down:
                    problems.append(f"site {site} is dead at load; its incident {incident.id} says it is up")
            if incident is not None:
                wrong = [slug for slug in incident.deactivated
                         if slug in state["plugins"] and state["plugins"][slug]["active"]]
                if wrong and not state["front_end"]["dead_at_load"]:
                    problems.append(f"incident {incident.id} says {wrong} still deactivated on site {site}: active")
        self.violated("every site down has a true incident", problems)

    @invariant()
    def no_hold_without_evidence(self) -> None:
        """A release that was never bad is not withheld for more than a few nights with no open incident naming
        it."""
        step = self.last
        if step is None or step.kind != "night" or step.summary is None:
            return
        summary = step.summary
        named = {s.to_version for i in self.incidents.open_incidents() for s in [*i.suspects, *filter(None, [
            i.culprit])] if s.slug == self.slug}
        withheld_items = [item for item in summary.items if item.outcome is Outcome.held and item.rule == "night_hold"]
        STATS["items withheld"] += len(withheld_items)
        withheld = {item.to_version for item in withheld_items if item.slug == self.slug}
        problems = []
        for version, release in self.releases.items():
            if release.kind != "good" or version not in withheld or version in named:
                self.held_nights.pop(version, None)
                continue
            self.held_nights[version] = self.held_nights.get(version, 0) + 1
            if self.held_nights[version] > HELD_WITHOUT_EVIDENCE:
                problems.append(f"{self.slug} {version} was never bad and is withheld for "
                                f"{self.held_nights[version]} nights with no open incident naming it")
        self.violated("no hold without evidence", problems)

    @invariant()
    def exit_code_runs_and_reports_agree(self) -> None:
        """The exit code, `fleet runs`, summary.json, the holds store and the operator's report say the same
        night."""
        step = self.last
        if step is None or step.kind not in ("night", "dry") or step.summary is None:
            return
        summary, code, operator = step.summary, step.code, step.operator
        problems = self.runs_agree(summary, code)
        if summary.dry_run:
            problems += [f"a dry run exited {code}"] if code not in (0, 9) else []
            self.violated("exit code, fleet runs and the reports agree", problems)
            return
        if bool(summary.broken) != (code == 7):
            problems.append(f"exit {code} with {len(summary.broken)} broken site(s) in summary.json")
        still_down = [i for i in summary.incidents if i.is_open and i.down and i.opened_by != summary.run_id]
        if not summary.broken and still_down and code != 8:
            problems.append(f"exit {code} with incident(s) {[i.id for i in still_down]} still down")
        for alarm in summary.broken:
            if alarm.site_url not in operator:
                problems.append(f"the report does not name broken site {alarm.site_url}")
        stored = {(h.slug, h.version) for h in self.holds.active()}
        said = {(h.slug, h.version) for h in summary.holds}
        if stored != said:
            problems.append(f"summary.json says {sorted(said)} are held, the store {sorted(stored)}")
        for hold in summary.holds:
            if f"{hold.version}, held as a {hold.kind.value}" not in operator:
                problems.append(f"the report does not list the hold {hold.item}@{hold.version}")
        self.violated("exit code, fleet runs and the reports agree", problems)

    def runs_agree(self, summary: Summary, code: int) -> list[str]:
        """`fleet runs` lists the night with the status its exit code says, and as many sites broken."""
        listed = CliRunner().invoke(app, ["runs", "--report-dir", str(self.home / "reports"), "-n", "1"])
        row = next((line for line in listed.output.splitlines() if line.startswith(summary.run_id)), None)
        if listed.exit_code != 0 or row is None:
            return [f"`fleet runs` does not list run {summary.run_id} (exit {listed.exit_code}): {listed.output}"]
        status = row.removeprefix(summary.run_id).split()
        expected = {0: ("dry", "run") if summary.dry_run else ("completed",), 7: ("broke",), 8: ("still", "down"),
                    9: ("did", "nothing")}.get(code)
        if expected is None or tuple(status[: len(expected)]) != expected:
            return [f"exit {code}, and `fleet runs` says {' '.join(status[:3])!r}"]
        if code == 7 and status[1] != str(len(summary.broken)):
            return [f"`fleet runs` says broke {status[1]}, summary.json {len(summary.broken)} broken site(s)"]
        return []

    @invariant()
    def updated_means_moved(self) -> None:
        """No item is counted updated whose installed version did not move."""
        step = self.last
        if step is None or step.summary is None or step.after is None:
            return
        problems = []
        for item in step.summary.items:
            if item.outcome is not Outcome.updated or item.type.value != "plugin" or not item.to_version:
                continue
            plugin = step.after["sites"].get(str(item.site_id), {}).get("plugins", {}).get(item.slug)
            if plugin is not None and plugin["version"] != item.to_version and item.applied_by_run is None:
                problems.append(f"site {item.site_id}: {item.slug} counted updated to {item.to_version}, "
                                f"installed {plugin['version']}")
        self.violated("updated means moved", problems)

    @invariant()
    def every_write_is_reported_once(self) -> None:
        """Every installed version a run moved (a killed night's included) is reported by exactly one run, once
        a run of the dashboard that wrote has followed the kill."""
        step = self.last
        if step is None or step.before is None or step.after is None or step.kind in ("other", "change"):
            return
        for site_id, site in step.after["sites"].items():
            was = step.before["sites"].get(site_id)
            for kind in TRACKED:
                for slug, item in site[kind].items():
                    old = (was or {}).get(kind, {}).get(slug)
                    if old is not None and old["version"] != item["version"]:
                        self.changes[(int(site_id), kind.rstrip("s"), slug, item["version"])] += 1
        if self.killed or step.kind not in ("night", "security") or step.summary is None:
            return  # a killed night's writes are owed until the dashboard's next run that writes
        reported: Counter[tuple[int, str, str, str]] = Counter()
        for path in self.run_dirs():
            if not (path / "summary.json").exists():
                continue
            summary = Summary.read(path)
            if summary.interrupted or summary.dashboard != self.server.base_url:
                continue  # a killed run's summary repeats what the run that accounted for it reports
            for item in summary.items:
                if item.outcome not in NOT_ATTEMPTED and item.outcome is not Outcome.unchanged and item.to_version:
                    reported[(item.site_id, item.type.value, item.slug, item.to_version)] += 1
        problems = []
        for key, moved in self.changes.items():
            STATS["writes checked"] += 1
            if reported[key] != moved:
                problems.append(f"site {key[0]}: {key[1]} {key[2]} moved to {key[3]} {moved} time(s), reported "
                                f"{reported[key]} time(s)")
        self.violated("every write is reported once", problems)

    @invariant()
    def no_run_reads_another_dashboards_memory(self) -> None:
        """A night against the second dashboard finishes on its own, and accounts for none of A's runs; A's runs
        account only for A's."""
        step = self.last
        if step is None or step.kind not in ("other", "night", "security") or step.summary is None:
            if step is not None and step.kind == "other" and step.summary is None:
                self.violated("no run reads another dashboard's memory", [
                    f"the second dashboard's night wrote no summary (exit {step.code}): {step.operator}"])
            return
        summary, problems = step.summary, []
        mine = {path.name for path in self.run_dirs() if not (path / "summary.json").exists() or
                Summary.read(path).dashboard in (None, self.server.base_url)}
        if step.kind == "other":
            if step.code not in (0, 7, 8, 9):
                problems.append(f"the second dashboard's night exited {step.code}: {step.operator}")
            problems += [f"the second dashboard's night accounted for {run}" for run in summary.accounts_for]
        else:
            problems += [f"a run of {self.server.base_url} accounted for {run}, not its own"
                         for run in summary.accounts_for if run not in mine]
        self.violated("no run reads another dashboard's memory", problems)

    @invariant()
    def every_deferral_is_true(self) -> None:
        """Every deferred item's reason is true of the windows at the run's start: a window it says is closed is
        closed, "already maintained" only for a site that has a window open now, the next opening it names is
        right, and "no window opens" only when none does."""
        step = self.last
        if step is None or step.summary is None or step.plan is None or step.kind not in ("night", "security", "dry"):
            return
        policy = parse_policy(step.policy)
        sites = {site.id: site for site in step.plan.sites}
        at = step.plan.planned_for or step.summary.started_at
        problems = []
        for item in step.summary.items:
            if item.outcome is not Outcome.deferred or item.site_id not in sites:
                continue
            STATS["deferrals checked"] += 1
            site = sites[item.site_id]
            now = availability(policy.windows, policy.blackouts, site.tags, site.client, at)
            reason = item.reason or ""
            said = f"site {item.site_id} {item.slug}: {reason!r}"
            if reason.startswith("already maintained"):
                if not now.open or now.then is None:
                    problems.append(f"{said}, but the site has no window open now")
                elif item.opens_at != now.then.opens_at:
                    problems.append(f"{said}: next opening {item.opens_at}, the window's {now.then.opens_at}")
            elif reason.startswith(("outside its maintenance window", "blackout")):
                if now.open:
                    problems.append(f"{said}, but its window is open at {at:%H:%M} UTC")
                elif item.opens_at != now.deferral.opens_at:
                    problems.append(f"{said}: next opening {item.opens_at}, the window's {now.deferral.opens_at}")
            if "no window opens within" in reason and (now.deferral or now.then) is not None and \
                    (now.deferral or now.then).opens_at is not None:
                problems.append(f"{said}, but a window opens at {(now.deferral or now.then).opens_at}")
        self.violated("every deferral is true", problems)

    @invariant()
    def a_fix_reaches_every_site_allowed(self) -> None:
        """After a security run, every site offered the published fix whose window and policy allow it has it:
        a healthy, reachable site, the fix not held, no blackout, and its window open when fixes wait for it."""
        step = self.last
        if step is None or step.kind != "security" or step.fix is None or not step.feed_right:
            return
        policy = parse_policy(step.policy)
        held = {(h.slug, h.version) for h in self.holds.active()}
        sites = {site.id: site for site in step.plan.sites} if step.plan else {}
        down = {i.site_id for i in self.incidents.open_incidents()}
        problems = []
        for site_id in sorted(step.offered_fix):
            state = step.after["sites"].get(str(site_id))
            if (state is None or (self.slug, step.fix) in held or site_id in down or broken(state)
                    or state["status"] != "connected" or not state["reachable"]):
                continue
            if policy.security.windows and site_id in sites:
                site = sites[site_id]
                if not availability(policy.windows, policy.blackouts, site.tags, site.client,
                                    step.plan.created_at).open:
                    continue
            if self.version_on(step.after, site_id) != step.fix:
                why = "the run did nothing" if step.summary is None else f"run {step.summary.run_id}"
                problems.append(f"site {site_id} was offered the fix {self.slug} {step.fix} and has "
                                f"{self.version_on(step.after, site_id)} after the security run ({why})")
        self.violated("a fix reaches every site allowed within one security interval", problems)

    @invariant()
    def a_run_that_applies_nothing_writes_nothing(self) -> None:
        """A security run that found nothing to apply writes no run directory and sends nothing."""
        step = self.last
        if step is None or step.kind != "security" or step.summary is not None:
            return
        self.violated("a run that applies nothing writes nothing",
                      [f"a security run with nothing to apply wrote {path}" for path in step.new_dirs])

    @invariant()
    def no_site_whose_guard_answers_is_left_down(self) -> None:
        """A site whose guard answers is never left down by a plugin or theme update at a run's end (issue 45)."""
        step = self.last
        if step is None or step.summary is None or step.after is None or step.kind not in ("night", "security"):
            return
        self.violated("no site whose guard answers is left down",
                      guarded_sites_left_down(step.after, step.summary, parse_policy(step.policy), [GUARD_PUBLIC]))

    @invariant()
    def a_changed_feed_setting_is_read_at_once(self) -> None:
        """Every run reads the feed it is set to: a wrong FLEET_VULN_FEED is said, a corrected one read at once."""
        step = self.last
        if step is None or step.summary is None or step.kind not in ("night", "security"):
            return
        feed = step.summary.vulnerability_feed
        if feed is None:
            return
        wrong = str(self.home / "no-such-feed.json")
        problems = []
        if step.feed_right and feed.problem:
            problems.append(f"FLEET_VULN_FEED is right, and the run says: {feed.problem}")
        if not step.feed_right and wrong not in (feed.problem or ""):
            problems.append(f"FLEET_VULN_FEED is {wrong}, and the run says {feed.problem!r}")
        self.violated("a changed feed setting is read at once", problems)


async def run_quietly(run: Any) -> Any:
    """A security run's flow: its failure (a fix that broke a site) is the run's own verdict, read from its
    summary; the machine only needs its path."""
    from fleet.rules.breakage import NightFailure

    try:
        return await run
    except NightFailure as ended:
        return ended.summary_path


def read_plan(run_dir: Path) -> Plan | None:
    path = run_dir / "plan.json"
    return Plan.model_validate_json(path.read_text()) if path.exists() else None


def prefect_api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or ""


def broken(state: dict) -> str:
    """What a visitor of the site sees wrong at the night's end ("" when nothing): pages down, or a visual break."""
    if state["front_end"]["status"] != "up":
        return str(state["front_end"]["status"])
    return f"visually broken ({state['visual']['break']})" if state["visual"]["break"] else ""


def causes(state: dict) -> set[str]:
    """The culprits the site's ground truth names: a front-end break, a fatal, a visual break, and a release marked
    to break the pages visually that is installed (switched off by a containment, it shows no break)."""
    marked = {key for key, mark in state["visual"]["marked"].items()
              if (state["plugins"].get(key.partition(":")[2]) or {}).get("version") == mark["version"]}
    named = {state["front_end"]["broken_by"], state["front_end"]["fatal_by"], state["visual"]["by"], *marked}
    return named - {None, ""}


def night_environment(home: Path) -> dict[str, str]:
    return {"FLEET_STATE_DB": str(home / "state.sqlite"), "FLEET_REPORT_DIR": str(home / "reports"),
            "FLEET_JOB_POLL_SECONDS": "0.05", "FLEET_STALL_AFTER_SECONDS": "5", "FLEET_RETRY_INITIAL": "0.01",
            "FLEET_RETRY_CAP": "0.05", "FLEET_TIME_SCALE": "0.001", "FLEET_SMTP_HOST": "",
            "FLEET_REPORT_TO": "ops@example.com",
            # the feed read on every run, as an hourly security run reads it when due: a vulnerability published
            # between two runs is in the next one's copy
            "FLEET_VULN_REFRESH": "0"}


def shared_plugin(truth: dict) -> tuple[str, list[int]]:
    """The plugin most healthy connected sites have active, and those sites."""
    sites = [s for s in truth["sites"].values() if s["status"] == "connected" and s["reachable"]]
    best: tuple[str, list[int]] = ("", [])
    for slug in sorted({slug for site in sites for slug in site["plugins"]}):
        having = [site["id"] for site in sites if slug in site["plugins"] and site["plugins"][slug]["active"]]
        if len(having) > len(best[1]):
            best = (slug, having)
    assert len(best[1]) >= 2, "no plugin shared by two sites"
    return best
