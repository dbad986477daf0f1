"""The soak: the service night after night, as an operator runs it, with nobody watching.

A real `prefect server start` (its scheduler on a short loop), `fleet serve` as its own process with the nightly
deployment on an interval schedule, an emulated dashboard on a real socket, and a real SMTP server (aiosmtpd). The
fleet changes between nights as a real one does (`FleetScript`): new releases reach the sites over a few nights,
some of them bad (fatal while WordPress loads, or in a template), each fixed two nights later; a site is added;
the sites broken at sunrise are repaired by hand the next morning.

After each night (a scheduled flow run, observed through Prefect's API) it measures, from the outside:
- fired, and on time: the runner took the run (its Pending state) within `ON_TIME_SECONDS` of its expected start
  (it polls the server every 10 s and may take a run up to 10 s early); a late, queued or never-started run is
  not on time. When the flow began (Running) is shown beside it: the flow process's start-up on a busy machine;
- its final state, and its items by outcome (the `summary.json` it wrote);
- the reports delivered: report messages the SMTP server received against those `summary.json` says the night
  sent, the operator's among them; and the alerts (a failed night's, a site down);
- the sites broken at sunrise: the emulator's ground truth, pages answering WordPress's critical error (500);
- bad versions re-sent: from the ground truth, a version installed on a site on a night after the night that
  version broke a site (a break: a release marked bad in the emulator installed where its code runs, contained
  by the night or not);
- the state database's size (with its WAL) and the memory of `fleet serve` (RSS from /proc: the serving process
  at sunrise, and the peak of its process tree, the night's flow-run process included, during the night).

Targets (issue 29): every night fired, every night's reports delivered, no bad version sent twice, and the serving
process's memory growing less than 10% from night 2 to the last.

Run: `python bench/soak.py [--nights 14] [--sites 30] [--interval 120] [--time-scale 0.002] [--seed 0]
[--faults realistic] [--output DIR]`; `--nights 3` is a quick check (about 8 minutes).
Prints a row per night as it ends, then the table and the totals; writes bench/results/soak.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from email import message_from_bytes, policy
from functools import cmp_to_key
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if sys.path[0] == str(Path(__file__).resolve().parent):  # run as a script: bench/emulator.py would shadow `emulator`
    sys.path[0] = str(ROOT)

import httpx  # noqa: E402 - after the path fix above
from aiosmtpd.controller import Controller  # noqa: E402

from cli.demo import dashboard_environment  # noqa: E402
from cli.local_prefect import LocalPrefectServer, command_path, stop_process_group  # noqa: E402
from emulator.config import EmulatorConfig  # noqa: E402
from emulator.testing import EmulatorServer, free_port  # noqa: E402
from fleet.engine.estate import find_run_dir  # noqa: E402
from fleet.model.summary import Outcome, Summary  # noqa: E402
from fleet.model.wordpress_version import version_compare  # noqa: E402

NIGHTLY = ("nightly-maintenance", "nightly")
ON_TIME_SECONDS = 30.0  # the runner's 10 s poll, the flow process's start-up, and slack for a busy machine
SCHEDULER_LOOP = {"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5"}
OPERATOR = "ops@agency.example"
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
NIGHT_LIMIT = 10  # intervals after its expected start a night is waited for, before it is recorded as it is
TARGET_MEMORY_GROWTH = 0.10
SHORT = {Outcome.updated: "upd", Outcome.failed: "fail", Outcome.unchanged: "unch", Outcome.held: "held",
         Outcome.ignored: "ign", Outcome.delayed: "dly", Outcome.excluded: "excl", Outcome.skipped: "skip",
         Outcome.deferred: "def", Outcome.unknown: "unk"}


# ---- the mail server -------------------------------------------------------------------------------------------

@dataclass
class Mail:
    at: float
    subject: str
    recipients: list[str]

    @property
    def kind(self) -> str:
        if "maintenance report" in self.subject:
            return "report"
        return "site down" if " is down, " in self.subject else "alert"


@dataclass
class Mailroom:
    """The aiosmtpd handler: keeps every message it accepts (subject, recipients, when)."""

    received: list[Mail] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        message = message_from_bytes(envelope.content, policy=policy.default)
        self.received.append(Mail(time.time(), " ".join(str(message["Subject"]).split()), list(envelope.rcpt_tos)))
        return "250 2.0.0 Ok: queued"

    def since(self, after: float) -> list[Mail]:
        return [mail for mail in list(self.received) if mail.at > after]


@contextmanager
def smtp_server() -> Iterator[tuple[Controller, Mailroom]]:
    mailroom = Mailroom()
    controller = Controller(mailroom, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller, mailroom
    finally:
        controller.stop()


# ---- memory from /proc -----------------------------------------------------------------------------------------

def process_tree(root: int) -> list[int]:
    """`root` and its descendants (the runner's flow-run processes), from each process's parent in /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MemoryWatch:
    """Samples the RSS of a process tree once a second in a thread; `peak()` since the last `reset()`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="soak-memory", daemon=True)
        self._thread.start()

    def tree_rss(self) -> int:
        return sum(rss_bytes(pid) for pid in process_tree(self.pid))

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            self._peak = max(self._peak, self.tree_rss())

    def reset(self) -> None:
        self._peak = self.tree_rss()

    def peak(self) -> int:
        return max(self._peak, self.tree_rss())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# ---- the fleet, as the ground truth sees it -------------------------------------------------------------------

ItemKey = tuple[int, str, str]  # (site id, "wp" | "plugin" | "theme", slug)
BREAKING = ("break", "load")  # the emulator's marks of a release that breaks the site it is installed on
ReleaseKey = tuple[str, str, str]  # (type, slug, version): a release


@dataclass
class FleetView:
    """One reading of the ground truth: installed and offered versions, the bad releases' marks, broken sites."""

    versions: dict[ItemKey, str]
    offers: dict[ItemKey, str]
    active: dict[ItemKey, bool]  # core is always active
    marks: dict[ItemKey, str]  # the emulator's faults on each item's next update ("break", "load", "fail", ...)
    broken: list[int]  # pages answer WordPress's critical error (500)

    @classmethod
    def read(cls, truth: dict[str, Any]) -> FleetView:
        versions: dict[ItemKey, str] = {}
        offers: dict[ItemKey, str] = {}
        active: dict[ItemKey, bool] = {}
        marks: dict[ItemKey, str] = {}
        broken = []
        for key, site in truth["sites"].items():
            site_id = int(key)
            versions[(site_id, "wp", "wordpress")] = site["wp"]["version"]
            active[(site_id, "wp", "wordpress")] = True
            if site["wp"]["offer"]:
                offers[(site_id, "wp", "wordpress")] = site["wp"]["offer"]
            for kind, items in (("plugin", site["plugins"]), ("theme", site["themes"])):
                for slug, item in items.items():
                    versions[(site_id, kind, slug)] = item["version"]
                    active[(site_id, kind, slug)] = item["active"]
                    if item["offer"]:
                        offers[(site_id, kind, slug)] = item["offer"]
            for item, mode in site["fail_items"].items():
                kind, _, slug = item.partition(":")
                marks[(site_id, kind, slug)] = mode
            if site["front_end"]["broken"]:
                broken.append(site_id)
        return cls(versions, offers, active, marks, sorted(broken))

    def newest(self, kind: str, slug: str) -> str:
        """The newest version of an item anywhere in the fleet, installed or offered."""
        found = [v for (_, k, sl), v in (*self.versions.items(), *self.offers.items()) if (k, sl) == (kind, slug)]
        return max(found, key=cmp_to_key(version_compare))


def newer(a: str, b: str) -> bool:
    return version_compare(a, b) > 0


def next_patch(version: str) -> str:
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:3]]
    parts += [0] * (3 - len(parts))
    parts[2] += 1
    return ".".join(str(p) for p in parts)


# ---- what changes between nights -------------------------------------------------------------------------------

@dataclass
class Release:
    """A new version of a plugin or theme. It reaches the sites that run the item over a few nights (WordPress
    looks for releases twice a day, and only on a visit where WP-Cron is off); a bad one breaks every site that
    installs it while it is active (the emulator's mark on each site it reaches)."""

    type: str
    slug: str
    version: str
    fault: str | None  # None, "load" (fatal while WordPress loads: the child dies too) or "break" (in a template)
    published: int  # the night before which it first appears
    reaches: dict[int, int] = field(default_factory=dict)  # site id -> the night before which it is offered there

    @property
    def label(self) -> str:
        return f"{self.slug.split('/')[0]} {self.version}" + (f" (bad: {self.fault})" if self.fault else "")


REACH_DELAYS = (0, 0, 0, 1, 1, 2)  # nights after publication at which a site sees a release: half at once


class FleetScript:
    """The fleet's story between nights, drawn from the seed. Before night n (n >= 2), through the emulator's
    ground-truth routes: `releases` new good releases; on nights 2, 5, 8, ... a bad release of a widely used
    active plugin (fatal at load, then in a template, in turn), its fix published two nights later; on nights 3
    and 9 a site added (a client's, offered the releases out by then); the sites broken at the last sunrise
    repaired by hand (the culprit's folder renamed)."""

    BAD_FROM, BAD_EVERY, FIX_AFTER = 2, 3, 2
    ADDED_ON = (3, 9)

    def __init__(self, admin: httpx.Client, seed: int, releases: int) -> None:
        self.admin = admin
        self.rng = random.Random(f"{seed}:soak")
        self.releases_per_night = releases
        self.releases: list[Release] = []
        self.offered: dict[ItemKey, Release] = {}  # the newest release each site is offered by the script
        self.bad_used: set[str] = set()
        self.added: list[int] = []

    def truth(self) -> dict[str, Any]:
        answer = self.admin.get("/__emulator__/state")
        answer.raise_for_status()
        return answer.json()

    def post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.admin.post(f"/__emulator__/{route}", json=body)
        answer.raise_for_status()
        return answer.json()

    def before(self, night: int, view: FleetView, clients: list[int]) -> list[str]:
        """Change the fleet for `night`; says what changed."""
        said = []
        for site_id in view.broken:
            repaired = self.post("sites/repair", {"site_id": site_id})
            said.append(f"site {site_id} repaired by hand ({repaired['repaired'] or 'its break lifted'})")
        if night >= 2:
            for release in self._publish(night, view):
                said.append(f"release {release.label} published, reaching {len(release.reaches)} site(s) over "
                            f"{max(release.reaches.values()) - night + 1} night(s)")
        if night in self.ADDED_ON:
            said.append(self._add_site(night, clients))
            view = FleetView.read(self.truth())
        reached = self._reach(night, view)
        if reached:
            said.append(f"{reached} offer(s) reached their sites")
        return said

    def _publish(self, night: int, view: FleetView) -> list[Release]:
        sites_of: dict[tuple[str, str], list[int]] = {}
        for (site_id, kind, slug) in view.versions:
            if kind != "wp":
                sites_of.setdefault((kind, slug), []).append(site_id)
        fresh = []
        if (night - self.BAD_FROM) % self.BAD_EVERY == 0:
            fresh.append(self._bad_release(night, view, sites_of))
        for bad in [r for r in self.releases if r.fault and r.published + self.FIX_AFTER == night]:
            fresh.append(self._release(bad.type, bad.slug, next_patch(bad.version), None, night,
                                       sites_of.get((bad.type, bad.slug), [])))
        common = sorted(key for key, sites in sites_of.items() if len(sites) >= 2
                        and key[1] not in self.bad_used and key[1] != "mainwp-child/mainwp-child.php")
        for kind, slug in self.rng.sample(common, min(self.releases_per_night, len(common))):
            fresh.append(self._release(kind, slug, next_patch(view.newest(kind, slug)), None, night,
                                       sites_of[(kind, slug)]))
        return fresh

    def _bad_release(self, night: int, view: FleetView, sites_of: dict[tuple[str, str], list[int]]) -> Release:
        """The most widely active plugin not made bad before: its next version fatals, at load or in a template."""
        activity = Counter(slug for (_, kind, slug), on in view.active.items() if on and kind == "plugin"
                           and slug not in self.bad_used and slug != "mainwp-child/mainwp-child.php")
        slug = activity.most_common(1)[0][0]
        self.bad_used.add(slug)
        fault = ("load", "break")[((night - self.BAD_FROM) // self.BAD_EVERY) % 2]
        return self._release("plugin", slug, next_patch(view.newest("plugin", slug)), fault, night,
                             sites_of[("plugin", slug)])

    def _release(self, kind: str, slug: str, version: str, fault: str | None, night: int,
                 sites: list[int]) -> Release:
        release = Release(kind, slug, version, fault, night,
                          {site: night + self.rng.choice(REACH_DELAYS) for site in sorted(sites)})
        self.releases.append(release)
        return release

    def _add_site(self, night: int, clients: list[int]) -> str:
        client = clients[len(self.added) % len(clients)] if clients else 0
        site = self.post("sites/add", {"url": f"https://added-on-night-{night}.example.com",
                                       "name": f"Added on night {night}", "admin": "owner", "client_id": client})
        site_id = int(site["id"])
        self.added.append(site_id)
        for kind, items in (("plugin", site["plugins"]), ("theme", site["themes"])):
            for slug in items:
                mine = [r for r in self.releases if (r.type, r.slug) == (kind, slug)]
                if mine:  # a site new to the dashboard has looked for releases lately: it is offered the newest
                    newest = max(mine, key=cmp_to_key(lambda a, b: version_compare(a.version, b.version)))
                    newest.reaches[site_id] = night
        return f"site {site_id} added (client {client or 'none'}), {sum(len(site[k]) for k in ('plugins', 'themes'))}" \
               " plugins and themes"

    def _reach(self, night: int, view: FleetView) -> int:
        """Offer each site the newest release that has reached it by tonight; mark it as the release is."""
        count = 0
        for release in self.releases:
            for site_id, when in release.reaches.items():
                key = (site_id, release.type, release.slug)
                if when > night or key not in view.versions:
                    continue
                current = self.offered.get(key)
                if current is not None and not newer(release.version, current.version):
                    continue
                if not newer(release.version, view.versions[key]):
                    continue
                self.post("offers", {"site_id": site_id, "type": release.type, "slug": release.slug,
                                     "version": release.version})
                self.post("faults/items", {"site_id": site_id, "type": release.type, "slug": release.slug,
                                           "mode": release.fault})
                self.offered[key] = release
                count += 1
        return count


# ---- the nights, observed --------------------------------------------------------------------------------------

@dataclass
class NightRow:
    """One night as the soak saw it from outside the product."""

    night: int
    changes: list[str]  # what changed in the fleet before this night
    flow_run: str | None = None
    expected_start: str | None = None
    fired_s: float | None = None  # when the runner took the run (Pending), after its expected start
    began_s: float | None = None  # when the flow began (Running), after its expected start: the process's start-up
    fired: bool = False
    on_time: bool = False  # fired within ON_TIME_SECONDS
    state: str = "never ran"
    message: str = ""
    wall_s: float | None = None
    outcomes: dict[str, int] = field(default_factory=dict)
    reports_sent: int = 0  # report messages x recipients the night says it sent over SMTP
    reports_received: int = 0  # the same, as the SMTP server received them
    operator_report: bool = False
    delivered: bool = False
    alerts: int = 0  # a failed night's alert, one message per break
    installs: int = 0  # item versions that moved on any site (ground truth)
    breaks: list[dict[str, Any]] = field(default_factory=list)  # sites the night's updates broke (ground truth)
    said_broken: list[dict[str, Any]] = field(default_factory=list)  # what the night's summary.json says it broke
    broken_at_sunrise: list[int] = field(default_factory=list)
    resent: list[dict[str, Any]] = field(default_factory=list)  # a version installed after it broke a site
    state_db_bytes: int = 0
    serve_rss_bytes: int = 0  # `fleet serve` alone, after the night's flow-run process ended
    peak_tree_rss_bytes: int = 0  # `fleet serve` and its flow-run process, during the night
    sunrise_at: float = 0.0  # when these were measured (epoch seconds)
    load_1min: float = 0.0  # the machine's load average then (2 cores, shared)


class PrefectRuns:
    """The nightly deployment's flow runs, read from the Prefect server's REST API."""

    def __init__(self, api_url: str) -> None:
        self.http = httpx.Client(base_url=api_url, timeout=30)

    def deployment_id(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = self.http.get("/deployments/name/{}/{}".format(*NIGHTLY))
            if answer.status_code == 200:
                return str(answer.json()["id"])
            time.sleep(1)
        raise RuntimeError(f"fleet serve registered no {'/'.join(NIGHTLY)} deployment in {timeout:g} s")

    def pending_at(self, run_id: str) -> datetime | None:
        """When the runner took the run: its first Pending state."""
        answer = self.http.get("/flow_run_states/", params={"flow_run_id": run_id})
        answer.raise_for_status()
        return min((moment(state["timestamp"]) for state in answer.json() if state["type"] == "PENDING"),
                   default=None)

    def next_run(self, deployment_id: str, seen: list[str], after: str | None) -> dict[str, Any] | None:
        """The earliest run of the deployment not seen yet, expected no earlier than `after`."""
        runs: dict[str, Any] = {"id": {"not_any_": seen}} if seen else {}
        if after:
            runs["expected_start_time"] = {"after_": after}
        answer = self.http.post("/flow_runs/filter", json={
            "deployments": {"id": {"any_": [deployment_id]}}, "flow_runs": runs,
            "sort": "EXPECTED_START_TIME_ASC", "limit": 1})
        answer.raise_for_status()
        found = answer.json()
        return found[0] if found else None


def moment(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def file_size(path: Path) -> int:
    """A SQLite file with its write-ahead log."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def from_summary(row: NightRow, summary: Summary | None, mails: list[Mail]) -> None:
    """What the night wrote (items by outcome, the sites it says it broke), and the reports it says it sent over
    SMTP against those the server received; alerts apart."""
    if summary:
        row.outcomes = {outcome.value: n for outcome, n in summary.counts.by_outcome.items()}
        row.said_broken = [{"site_id": alarm.site_id, "saw": alarm.saw[:200]} for alarm in summary.broken]
    sent = [d for d in summary.deliveries if not d.held and not d.answer.startswith("not sent")] if summary else []
    reports = [mail for mail in mails if mail.kind == "report"]
    row.reports_sent = len(sent)
    row.reports_received = sum(len(mail.recipients) for mail in reports)
    row.operator_report = any(OPERATOR in mail.recipients and not mail.subject.startswith("[held")
                              for mail in reports)
    row.delivered = (row.operator_report and row.reports_received == row.reports_sent
                     and all(d.accepted for d in sent))
    row.alerts = sum(1 for mail in mails if mail.kind != "report")


def ground_truth(row: NightRow, before: FleetView, after: FleetView, bad: dict[ReleaseKey, int]) -> None:
    """Installs, breaks and re-sent bad versions between the view before the night and the one at sunrise. A break:
    a release the emulator was told is bad ("break", "load") installed where its code runs (the mark is used up
    when it is installed), whether the night contained it or not. `bad` (release -> the night it first broke a
    site) gains tonight's breaks after tonight's installs are judged."""
    installs = {key: version for key, version in after.versions.items()
                if key in before.versions and before.versions[key] != version}
    row.installs = len(installs)
    for (site_id, kind, slug), version in sorted(installs.items()):
        first = bad.get((kind, slug, version))
        if first is not None:
            row.resent.append({"site_id": site_id, "type": kind, "slug": slug, "version": version,
                               "first_broke_a_site_on_night": first})
    for key, version in sorted(installs.items()):  # a bad release installed where its code runs broke the site
        if before.marks.get(key) in BREAKING and key not in after.marks and before.active.get(key):
            site_id, kind, slug = key
            row.breaks.append({"site_id": site_id, "type": kind, "slug": slug, "version": version,
                               "how": before.marks[key], "contained": site_id not in after.broken})
            bad.setdefault((kind, slug, version), row.night)
    row.broken_at_sunrise = after.broken


def observe(row: NightRow, run: dict[str, Any], pending: datetime | None) -> None:
    row.flow_run = str(run["id"])
    row.expected_start = run["expected_start_time"]
    row.state = run.get("state_name") or str(run.get("state_type"))
    row.message = ((run.get("state") or {}).get("message") or "")[:300]
    expected, began, ended = (moment(run.get(k)) for k in ("expected_start_time", "start_time", "end_time"))
    if expected and pending:
        row.fired_s = (pending - expected).total_seconds()
        row.on_time = row.fired_s <= ON_TIME_SECONDS
    if expected and began:
        row.fired = True
        row.began_s = (began - expected).total_seconds()
    if began and ended:
        row.wall_s = (ended - began).total_seconds()


@dataclass
class Soak:
    settings: dict[str, Any]
    rows: list[NightRow]

    def totals(self) -> dict[str, Any]:
        n = len(self.rows)
        resent = [r for row in self.rows for r in row.resent]
        memory = [row.serve_rss_bytes for row in self.rows if row.serve_rss_bytes]
        growth = (memory[-1] - memory[1]) / memory[1] if len(memory) >= 2 and memory[1] else None
        return {
            "nights": n,
            "fired": sum(row.fired for row in self.rows),
            "on_time": sum(row.on_time for row in self.rows),
            "delivered": sum(row.delivered for row in self.rows),
            "bad_versions_resent": len({(r["type"], r["slug"], r["version"]) for r in resent}),
            "bad_installs_resent": len(resent),
            "breaks": sum(len(row.breaks) for row in self.rows),
            "memory_growth_night2_to_last": growth,
            "targets_met": {
                "every night fired": sum(row.fired for row in self.rows) == n,
                "every night's reports delivered": sum(row.delivered for row in self.rows) == n,
                "no bad version sent twice": not resent,
                "memory growth under 10% from night 2": growth is not None and growth < TARGET_MEMORY_GROWTH,
            },
        }


def run_soak(*, nights: int, sites: int, interval: float, time_scale: float, seed: int, faults: str,
             releases: int, output: Path, say: Callable[[str], None] = print) -> Soak:
    """Start everything, watch `nights` scheduled nights, stop everything; the rows as they were measured."""
    output = output.resolve()
    if output.exists() and any(output.iterdir()):
        raise SystemExit(f"{output} is not empty: a soak starts from no state (give a new --output)")
    output.mkdir(parents=True, exist_ok=True)
    reports, state_db, serve_log = output / "reports", output / "fleet-state.sqlite", output / "serve.log"
    config = EmulatorConfig(sites=sites, seed=seed, faults=faults, time_scale=time_scale)
    rows: list[NightRow] = []
    with smtp_server() as (smtp, mailroom), EmulatorServer(config) as emulator, \
            LocalPrefectServer(output / "prefect", SCHEDULER_LOOP) as prefect, \
            httpx.Client(base_url=emulator.root_url, timeout=120,
                         headers={"X-Emulator-Token": emulator.credentials["admin_token"]}) as admin:
        script = FleetScript(admin, seed, releases)
        clients = sorted(emulator.emulator.state.clients)
        inherited = {k: v for k, v in prefect.environment().items() if not k.startswith("FLEET_")}  # none of ours
        env = inherited | dict(
            **dashboard_environment(emulator.credentials), FLEET_TIME_SCALE=str(time_scale),
            FLEET_SCHEDULE_INTERVAL_SECONDS=f"{interval:g}", FLEET_REPORT_DIR=str(reports),
            FLEET_STATE_DB=str(state_db), FLEET_SMTP_HOST=smtp.hostname, FLEET_SMTP_PORT=str(smtp.port),
            FLEET_SMTP_SECURITY="none", FLEET_MAIL_FROM="Fleet reports <reports@agency.example>",
            FLEET_REPORT_TO=OPERATOR, COLUMNS="200",
            FLEET_KILL_SWITCH_SITES="0")  # its releases break sites night after night on purpose: never paused
        view = FleetView.read(script.truth())
        bad: dict[ReleaseKey, int] = {}
        with serve_log.open("wb") as log:  # run in the output directory: no .env of this checkout is read
            serving = subprocess.Popen([command_path("fleet"), "serve"], env=env, cwd=output, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        memory = MemoryWatch(serving.pid)
        try:
            runs = PrefectRuns(prefect.api_url)
            deployment = runs.deployment_id(timeout=180)
            say(f"fleet serve is serving {'/'.join(NIGHTLY)} every {interval:g} s; {sites} sites, time scale "
                f"{time_scale:g}, faults {faults}; output in {output}")
            changes: list[str] = ["the generated fleet as it is"]
            seen: list[str] = []
            after: str | None = None
            for night in range(1, nights + 1):
                row = NightRow(night=night, changes=changes)
                run = wait_for_night(runs, deployment, seen, after, interval)
                if run is not None:
                    seen.append(str(run["id"]))
                    after = run["expected_start_time"]
                    observe(row, run, runs.pending_at(str(run["id"])))
                    wait_for_exit(serving.pid, str(run["id"]))
                    directory = find_run_dir(reports, str(run["id"]))
                    began = moment(run.get("start_time"))
                    from_summary(row, Summary.read(directory) if directory else None,
                                 mailroom.since(began.timestamp() if began else time.time()))
                sunrise = FleetView.read(script.truth())
                ground_truth(row, view, sunrise, bad)
                row.state_db_bytes = file_size(state_db)
                row.serve_rss_bytes = rss_bytes(serving.pid)
                row.peak_tree_rss_bytes = memory.peak()
                row.sunrise_at, row.load_1min = time.time(), os.getloadavg()[0]
                rows.append(row)
                say(format_row(row))
                if night < nights:
                    changes = script.before(night + 1, sunrise, clients)
                    upcoming = runs.next_run(deployment, seen, after)
                    if upcoming and upcoming.get("state_type") not in ("SCHEDULED", None):
                        changes.append(f"(changed late: night {night + 1} was already {upcoming['state_name']})")
                    view = FleetView.read(script.truth())
                memory.reset()
        finally:
            memory.stop()
            stop_serving(serving)
    settings = {"nights": nights, "sites": sites, "interval_s": interval, "time_scale": time_scale, "seed": seed,
                "faults": faults, "releases_per_night": releases, "on_time_tolerance_s": ON_TIME_SECONDS,
                "added_sites": script.added, "releases": [asdict(r) for r in script.releases]}
    return Soak(settings, rows)


def wait_for_night(runs: PrefectRuns, deployment: str, seen: list[str], after: str | None,
                   interval: float) -> dict[str, Any] | None:
    """The next scheduled run once it ended; one still not ended `NIGHT_LIMIT` intervals after its expected start
    is returned as it is then. None: the server scheduled none within three intervals."""
    waiting_since = time.time()
    while True:
        try:
            run = runs.next_run(deployment, seen, after)
        except httpx.TransportError:  # a busy server (a loaded suite's: 30 s without an answer) is asked again
            if time.time() - waiting_since > NIGHT_LIMIT * interval:
                raise
            time.sleep(2)
            continue
        now = time.time()
        if run is None:
            if now - waiting_since > 3 * interval:
                return None
        elif run["state_type"] in TERMINAL:
            return run
        else:
            expected = moment(run["expected_start_time"])
            if now - (expected.timestamp() if expected else waiting_since) > NIGHT_LIMIT * interval:
                return run
        time.sleep(2)


def night_processes(root: int, run_id: str) -> list[int]:
    """The processes under `root` that run this flow run (the runner hands them PREFECT__FLOW_RUN_ID)."""
    marker = f"PREFECT__FLOW_RUN_ID={run_id}".encode()
    found = []
    for pid in process_tree(root)[1:]:
        try:
            if marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:
            continue
    return found


def wait_for_exit(root: int, run_id: str, timeout: float = 60) -> None:
    """Until the night's flow-run process has exited: its failure hooks send the alert before it does."""
    deadline = time.monotonic() + timeout
    while night_processes(root, run_id) and time.monotonic() < deadline:
        time.sleep(0.5)


def stop_serving(serving: subprocess.Popen[bytes]) -> None:
    """As Ctrl-C or systemd's stop would: `fleet serve` pauses the schedule on its way out."""
    stop_process_group(serving, signal.SIGINT, timeout=60)


# ---- the table -------------------------------------------------------------------------------------------------

MiB = 1024 * 1024
COLUMNS = ("night", "expected (UTC)", "fired s", "began s", "on time", "state", "wall s", "items by outcome", "reports",
           "alerts", "broke", "said broke", "broken at sunrise", "re-sent", "state DB KiB", "serve MiB", "peak MiB")


def cells(row: NightRow) -> list[str]:
    items = " ".join(f"{SHORT[o]} {row.outcomes[o.value]}" for o in Outcome if row.outcomes.get(o.value))
    expected = moment(row.expected_start)
    return [
        str(row.night), f"{expected:%H:%M:%S}" if expected else "-",
        f"{row.fired_s:+.1f}" if row.fired_s is not None else "-",
        f"{row.began_s:+.1f}" if row.began_s is not None else "-", "yes" if row.on_time else "NO", row.state,
        f"{row.wall_s:.0f}" if row.wall_s is not None else "-", items or "-",
        f"{row.reports_received}/{row.reports_sent}" + ("" if row.delivered else " NOT"), str(row.alerts),
        str(len(row.breaks)), str(len(row.said_broken)), ", ".join(map(str, row.broken_at_sunrise)) or "0",
        str(len(row.resent)),
        f"{row.state_db_bytes / 1024:.0f}", f"{row.serve_rss_bytes / MiB:.0f}", f"{row.peak_tree_rss_bytes / MiB:.0f}",
    ]


def format_row(row: NightRow) -> str:
    return "  ".join(f"{name}: {value}" for name, value in zip(COLUMNS, cells(row), strict=True))


def table(soak: Soak, markdown: bool = False) -> str:
    grid = [list(COLUMNS), *(cells(row) for row in soak.rows)]
    if markdown:
        lines = ["| " + " | ".join(line) + " |" for line in grid]
        return "\n".join([lines[0], "| " + " | ".join("---" for _ in COLUMNS) + " |", *lines[1:]])
    widths = [max(len(line[i]) for line in grid) for i in range(len(COLUMNS))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)) for line in grid]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


def verdict(soak: Soak) -> str:
    totals, n = soak.totals(), len(soak.rows)
    growth = totals["memory_growth_night2_to_last"]
    met = totals["targets_met"]
    lines = [
        f"fired: {totals['fired']} of {n} ({totals['on_time']} taken by the runner within {ON_TIME_SECONDS:g} s)",
        f"reports delivered: {totals['delivered']} of {n}",
        f"bad versions sent again after they broke a site: {totals['bad_versions_resent']} "
        f"({totals['bad_installs_resent']} installs; {totals['breaks']} breaks in all)",
        "memory of fleet serve, night 2 to night {}: {}".format(
            n, f"{growth:+.1%}" if growth is not None else "not measured (fewer than 2 nights)"),
    ]
    lines += [f"  {'met' if ok else 'MISSED'}: {target}" for target, ok in met.items()]
    for row in soak.rows:
        for r in row.resent:
            lines.append(f"  night {row.night}: {r['type']} {r['slug']} {r['version']} installed on site "
                         f"{r['site_id']}, after it broke a site on night {r['first_broke_a_site_on_night']}")
    for row in soak.rows:
        truly = {b["site_id"] for b in row.breaks}
        for alarm in row.said_broken:
            if alarm["site_id"] not in truly:
                lines.append(f"night {row.night} said it broke site {alarm['site_id']}, which no bad release reached "
                             f"(the ground truth); it saw: {alarm['saw']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=14)
    parser.add_argument("--sites", type=int, default=30)
    parser.add_argument("--interval", type=float, default=120, help="seconds from one night to the next (>= 30)")
    parser.add_argument("--time-scale", type=float, default=0.002, help="the emulated dashboard's clock")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--faults", default="realistic", help="the emulator's fault profile")
    parser.add_argument("--releases", type=int, default=2, help="good releases published before each night")
    parser.add_argument("--output", type=Path, help="an empty working directory (default: bench/results/soak-TIME)")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "soak.json")
    parser.add_argument("--markdown", action="store_true", help="print the table in Markdown too")
    args = parser.parse_args()
    if args.interval < 30:
        parser.error("--interval must be at least 30 s (FLEET_SCHEDULE_INTERVAL_SECONDS)")
    output = args.output or ROOT / "bench" / "results" / f"soak-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    began, load_before = time.time(), os.getloadavg()
    soak = run_soak(nights=args.nights, sites=args.sites, interval=args.interval, time_scale=args.time_scale,
                    seed=args.seed, faults=args.faults, releases=args.releases, output=output)
    print()
    print(table(soak))
    for row in soak.rows:
        print(f"before night {row.night}: " + "; ".join(row.changes))
    print()
    print(verdict(soak))
    if args.markdown:
        print()
        print(table(soak, markdown=True))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "settings": soak.settings, "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "wall_s": time.time() - began, "load_before": load_before,
        "load_after": os.getloadavg(), "output": str(output), "totals": soak.totals(),
        "rows": [asdict(row) for row in soak.rows]}, indent=2))
    print(f"\nwritten to {args.json}")


if __name__ == "__main__":
    main()
