"""The promise "a bad version never breaks a site twice", checked over generated sequences of nights.

`NightsMachine` is a Hypothesis rule-based state machine: an emulated dashboard on a real socket, one plugin that
several sites share, and rules that offer its releases (good, a front-end fatal, fatal at load, which on a site
where it is switched off is fatal only when switched on, a visual break seen only in the night's screenshots) to
some sites one night and to others later, run nights (the whole fleet, a selection, a dry run, a lost answer, a
site that cannot be synced), repair a site by hand, release a hold and add a site. After every night it checks,
from the emulator's ground truth, the summary, the state database, `fleet runs` and the operator's report, the
invariants of `check`. `test_night_invariants.py` runs a few sequences in CI; `bench/invariants.py` runs
hundreds and counts them. A failing sequence prints as Python that replays it as a plain test (`state =
NightsMachine(); state.offer(...); ...`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from typer.testing import CliRunner

from cli.app import app
from cli.demo import dashboard_environment
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.model.summary import Outcome, Summary
from fleet.state.dashboard_memory import DashboardMemory
from fleet.state.holds import HoldStore
from fleet.state.incidents import IncidentStore
from fleet.visual.capture import chromium_path

# a front-end fatal; fatal at load (fatal only when switched on, where it is off); a stylesheet gone while the pages
# answer 200, seen only in the night's screenshots (the system Chromium: without it the kind is not drawn)
KINDS = ("good", "break", "load", "visual") if chromium_path() else ("good", "break", "load")
FAULT = {"good": None, "break": "break", "load": "load", "visual": None}
VISUAL = {"visual": {"sitemap_pages": 0, "viewports": ["desktop"], "baseline_gap_seconds": 0}}  # the home page
HELD_WITHOUT_EVIDENCE = 3  # nights a never-bad release may be withheld with no open incident naming it
# what the checks covered (read by bench/invariants.py): sequences, nights, releases that broke a site, items the
# nights' holds withheld, sites down at a night's end
STATS: dict[str, int] = {"sequences": 0, "nights": 0, "breaking releases": 0, "items withheld": 0, "sites down": 0}
VIOLATIONS: list[dict[str, Any]] = []  # each with its sequence: the steps that led to it
SEQUENCES: list[list[str]] = []  # every sequence run, as its steps
RAISE = True  # CI fails at the first violation (Hypothesis shrinks and prints it); the bench counts them all


@dataclass
class Release:
    version: str
    kind: str
    broke: set[int] = field(default_factory=set)  # sites it broke (ground truth), and on which night first
    first_broke: int | None = None
    released_by_operator: bool = False  # the operator's word overrides the nights' memory


class OutOfTime(Exception):  # noqa: N818 - it names what happened
    """The bench's time is up: no new sequence starts."""


class NightsMachine(RuleBasedStateMachine):
    """One dashboard over nights; every rule that runs a night checks the promise after it. A sequence shorter
    than `min_nights` nights ends with whole-fleet nights until it has them (the bench asks for 6)."""

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
        self.http = httpx.Client(base_url=self.server.root_url, timeout=30,
                                 headers={"x-emulator-token": self.server.config.admin_token.get_secret_value()})
        self.saved = {name: os.environ.get(name) for name in (*ENV_NAMES, *dashboard_environment(
            self.server.credentials))}
        os.environ.update({**dashboard_environment(self.server.credentials), **night_environment(self.home)})
        truth = self.truth()
        self.slug, self.sites = shared_plugin(truth)
        self.releases: dict[str, Release] = {}
        self.held_nights: dict[str, int] = {}  # version -> consecutive nights withheld without evidence
        self.night_number = 0
        self.added = 0  # sites the operator connected
        memory = DashboardMemory(self.home / "state.sqlite", self.server.base_url).path  # the dashboard's own
        self.holds = HoldStore(memory)
        self.incidents = IncidentStore(memory)
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
        finally:
            self.stop()

    def stop(self) -> None:
        self.http.close()
        self.server.stop()
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

    # ---- rules -------------------------------------------------------------------------------------------------

    @initialize()
    def a_first_whole_fleet_night(self) -> None:
        """The fleet's own pending updates applied once, so that later nights are about the plugin's releases. No
        release of the plugin is offered yet, so none can break a page visually: this night takes no screenshots
        (every site shot before and after each step would add 15 s to every sequence)."""
        self.step("a_first_whole_fleet_night()")
        self.night(screenshots=False)

    @rule(kind=st.sampled_from(KINDS), which=st.sets(st.integers(0, 5), min_size=1, max_size=3))
    def offer(self, kind: str, which: set[int]) -> None:
        """A new release (newer than every one before) reaches some sites: each site's own clock offers it."""
        version = f"100.{len(self.releases) + 1}.0"
        self.step(f"offer({kind!r}, {sorted(which)!r})  # {version}")
        self.releases[version] = Release(version, kind)
        self.reach(version, which)

    @precondition(lambda self: bool(self.releases))
    @rule(pick=st.integers(0, 20), which=st.sets(st.integers(0, 5), min_size=1, max_size=3))
    def offer_later(self, pick: int, which: set[int]) -> None:
        """An earlier release reaches more sites nights later (their own update clocks, a window, a failed sync)."""
        version = sorted(self.releases)[pick % len(self.releases)]
        self.step(f"offer_later({pick}, {sorted(which)!r})  # {version}")
        self.reach(version, which)

    def reach(self, version: str, which: set[int]) -> None:
        """The sites `which` are offered `version`, with its fault: a visual break is marked on the version the
        site offers now, so it shows once that version is installed and switched on."""
        kind = self.releases[version].kind
        for index in sorted(which):
            site = self.sites[index % len(self.sites)]
            self.post("offers", {"site_id": site, "type": "plugin", "slug": self.slug, "version": version})
            self.post("faults/items", {"site_id": site, "type": "plugin", "slug": self.slug, "mode": FAULT[kind]})
            if kind == "visual":
                self.post("faults/visual", {"site_id": site, "type": "plugin", "slug": self.slug, "mode": "css"})

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

    @rule(pick=st.integers(0, 5))
    def repaired_by_hand(self, pick: int) -> None:
        """The operator renames the culprit's folder on a broken site (WordPress switches it off)."""
        self.step(f"repaired_by_hand({pick})")
        truth = self.truth()["sites"]
        down = [site for site in self.sites if truth[str(site)]["front_end"]["status"] != "up"]
        if down:
            self.post("sites/repair", {"site_id": down[pick % len(down)]})

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

    @precondition(lambda self: self.added < 2)
    @rule()
    def a_site_added(self) -> None:
        self.step("a_site_added()")
        self.added += 1
        added = self.post("sites/add", {"url": f"https://added-{self.added}.example.org/"})
        if self.slug in added["plugins"]:
            self.sites.append(added["id"])

    # ---- a night, and the promise after it ---------------------------------------------------------------------

    def night(self, sites: list[int] | None = None, dry_run: bool = False,
              blackout: dict[str, str] | None = None, screenshots: bool = True) -> None:
        """`fleet nightly` under the sequence's policy: the home page screenshotted where a visual break can be
        drawn, and tonight's blackout."""
        policy = self.home / "policy.yaml"
        policy.write_text(yaml.safe_dump({**(VISUAL if screenshots and "visual" in KINDS else {}),
                                          **({"blackouts": [blackout]} if blackout else {})}))
        args = ["nightly", "--report-dir", str(self.home / "reports"), "--policy", str(policy)]
        if sites:
            args += ["--sites", ",".join(map(str, sites))]
        if dry_run:
            args.append("--dry-run")
        before = self.truth()
        result = CliRunner().invoke(app, args)
        lines = [line for line in result.output.splitlines() if line.startswith("summary: ")]
        assert lines, f"the night wrote no summary (exit {result.exit_code}): {result.output[-2000:]}"
        summary = Summary.read(Path(lines[0].removeprefix("summary: ")))
        operator = (Path(lines[0].removeprefix("summary: ")).parent / "report" / "operator.txt").read_text()
        self.night_number += 1
        STATS["nights"] += 1
        self.check(before, self.truth(), summary, result.exit_code, operator)

    def check(self, before: dict, after: dict, summary: Summary, code: int, operator: str) -> None:
        problems = (self.never_twice(before, after, summary) + self.incidents_true(after)
                    + self.no_hold_without_evidence(summary) + self.accounts_agree(summary, code, operator)
                    + self.updated_means_moved(after, summary))
        VIOLATIONS.extend({"night": self.night_number, "run": summary.run_id, "violation": p,
                           "sequence": list(self.steps)} for p in problems)
        if RAISE:
            assert not problems, "\n".join(problems)

    def version_on(self, truth: dict, site: int) -> str | None:
        plugin = truth["sites"][str(site)]["plugins"].get(self.slug)
        return plugin["version"] if plugin else None

    def never_twice(self, before: dict, after: dict, summary: Summary) -> list[str]:
        """A release that broke a site on an earlier night is never installed on another site."""
        problems = []
        for site in self.sites:
            if str(site) not in before["sites"]:
                continue
            was, now = self.version_on(before, site), self.version_on(after, site)
            release = self.releases.get(now or "")
            if now == was or release is None:
                continue
            if release.first_broke is not None and site not in release.broke and not release.released_by_operator:
                problems.append(f"{self.slug} {now} broke site(s) {sorted(release.broke)} on night "
                                f"{release.first_broke}, and was installed on site {site}")
        culprit = f"plugin:{self.slug}"
        for site in self.sites:
            state = after["sites"][str(site)]
            release = self.releases.get(self.version_on(after, site) or "")
            if release is None or release.kind == "good":
                continue
            if culprit in causes(state) and (
                    broken(state) or site in {a.site_id for a in summary.broken}):
                release.broke.add(site)
                if release.first_broke is None:
                    release.first_broke = self.night_number
                    STATS["breaking releases"] += 1
        return problems

    def incidents_true(self, after: dict) -> list[str]:
        """Every site down or broken at the night's end has an open incident whose culprit, version and what is
        switched off match the ground truth; no open incident says a plugin is off that is on."""
        problems = []
        incidents = {i.site_id: i for i in self.incidents.open_incidents()}
        for site in self.sites:
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
        return problems

    def no_hold_without_evidence(self, summary: Summary) -> list[str]:
        """A release that was never bad is not withheld for more than a few nights with no open incident naming
        it."""
        if summary.dry_run:
            return []
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
        return problems

    def accounts_agree(self, summary: Summary, code: int, operator: str) -> list[str]:
        """The exit code, `fleet runs`, summary.json, the holds store and the operator's report say the same
        night."""
        problems = self.runs_agree(summary, code)
        if summary.dry_run:
            return problems + ([f"a dry run exited {code}"] if code not in (0, 9) else [])
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
        return problems

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

    def updated_means_moved(self, after: dict, summary: Summary) -> list[str]:
        """No item is counted updated whose installed version did not move."""
        problems = []
        for item in summary.items:
            if item.outcome is not Outcome.updated or item.type.value != "plugin" or not item.to_version:
                continue
            plugin = after["sites"].get(str(item.site_id), {}).get("plugins", {}).get(item.slug)
            if plugin is not None and plugin["version"] != item.to_version:
                problems.append(f"site {item.site_id}: {item.slug} counted updated to {item.to_version}, "
                                f"installed {plugin['version']}")
        return problems


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


ENV_NAMES = ("FLEET_STATE_DB", "FLEET_REPORT_DIR", "FLEET_JOB_POLL_SECONDS", "FLEET_STALL_AFTER_SECONDS",
             "FLEET_RETRY_INITIAL", "FLEET_RETRY_CAP", "FLEET_TIME_SCALE")


def night_environment(home: Path) -> dict[str, str]:
    return {"FLEET_STATE_DB": str(home / "state.sqlite"), "FLEET_REPORT_DIR": str(home / "reports"),
            "FLEET_JOB_POLL_SECONDS": "0.05", "FLEET_STALL_AFTER_SECONDS": "5", "FLEET_RETRY_INITIAL": "0.01",
            "FLEET_RETRY_CAP": "0.05", "FLEET_TIME_SCALE": "0.001"}


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
