"""The nights' memory of bad versions: a version that broke a site, or failed on several, is held fleet-wide.

Kept in the state database beside the first-seen store. A hold stops exactly the remembered version of an item,
and is kept by evidence, not by one night's offers: releases reach a fleet over days (each site checks on its own
clock; sites outside their window, excluded or failing to sync are offered nothing that night), so a quiet night
proves nothing. A hold ends when an operator releases it (`fleet holds release`), or when no open incident names
the version AND whole-fleet nights (every site listed: no selection, none outside its window, no failed sync) on
the policy's `hold_quiet_days` days saw it offered nowhere since it was last offered anywhere. A suspect (applied
in the step that broke a site whose culprit was not found) is tried again on one site alone, a canary, once that
break's culprit is known, and released when the canary stays healthy.
The policy file's holds stay the operator's own; these are written and lifted by the nights.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from fleet.model.keys import VersionKey, offered_key
from fleet.model.summary import ContainmentStatus, HoldKind, NightHold, Outcome, Summary, UpdateType
from fleet.rules.plan import Decision, DetectedUpdate, PlanItem
from fleet.rules.policy import ItemRef, Rule
from fleet.state.database import open_state_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS night_holds (
    type TEXT NOT NULL, slug TEXT NOT NULL, version TEXT NOT NULL, name TEXT NOT NULL, reason TEXT NOT NULL,
    site TEXT, since TEXT NOT NULL, released TEXT,
    PRIMARY KEY (type, slug, version)
)
"""
# columns added after the table's first release: an older state database gains them on first use
_ADDED = {"kind": "TEXT NOT NULL DEFAULT 'culprit'", "quiet_days": "INTEGER NOT NULL DEFAULT 0", "quiet_day": "TEXT",
          "last_offered": "TEXT", "ends": "TEXT NOT NULL DEFAULT ''", "canary_run": "TEXT", "canary_site": "INTEGER"}
_ACTIVE = ("SELECT type, slug, version, name, reason, site, since, kind, quiet_days, last_offered, ends "
           "FROM night_holds WHERE released IS NULL ORDER BY since, type, slug")


def _hold(row: tuple) -> NightHold:
    type_, slug, version, name, reason, site, since, kind, quiet_days, last_offered, ends = row
    return NightHold(type=UpdateType(type_), slug=slug, version=version, name=name, reason=reason, site=site,
                     since=date.fromisoformat(since), kind=HoldKind(kind), quiet_days=quiet_days,
                     last_offered=date.fromisoformat(last_offered) if last_offered else None, ends=ends or "")


def key_of(hold: NightHold) -> VersionKey:
    return (hold.type, hold.slug, hold.version)


@dataclass(frozen=True)
class Canary:
    """A suspect's version tried tonight on one site alone."""

    key: VersionKey
    site_id: int


@dataclass(frozen=True)
class Evidence:
    """What a night knows when it weighs the holds: what was offered where, and what the incidents say."""

    offered: frozenset[VersionKey]  # every version offered to a listed site tonight (pending or ignored)
    whole_fleet: bool  # every site of the dashboard listed: no selection, none deferred, no failed sync
    named: dict[VersionKey, list[int]]  # version -> the open incidents that name it (culprit or suspect)
    culprits: frozenset[VersionKey]  # versions an incident knows as a break's culprit
    cleared: frozenset[VersionKey]  # the other suspects of those breaks: innocent there, to be tried alone
    quiet_days_needed: int
    today: date


class HoldStore:
    """The `night_holds` table of the pipeline's state file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        connection = open_state_db(self.path)
        connection.execute(_SCHEMA)
        present = {row[1] for row in connection.execute("PRAGMA table_info(night_holds)")}
        for column, declaration in _ADDED.items():
            if column not in present:
                connection.execute(f"ALTER TABLE night_holds ADD COLUMN {column} {declaration}")
        return connection

    def _run(self, statements: Iterable[tuple[str, list[tuple]]], query: str | None = None) -> list[tuple]:
        with self._connect() as connection:
            for sql, rows in statements:
                connection.executemany(sql, rows)
            found = connection.execute(query).fetchall() if query else []
        connection.close()
        return found

    def active(self) -> list[NightHold]:
        return [_hold(row) for row in self._run([], _ACTIVE)]

    def remember(self, holds: list[NightHold], quiet_days_needed: int = 30) -> list[NightHold]:
        """Hold each version (again, if it had been released); an active hold keeps its first reason, unless it
        was a suspect and is now a culprit. A version found bad again starts its quiet days over. Each says when
        it would end until the next night weighs it."""
        active = {key_of(hold): hold for hold in self.active()}
        fresh, upgraded, renewed = [], [], []
        for hold in holds:
            known = active.get(key_of(hold))
            if known is None:
                fresh.append(hold)
            elif known.kind is not HoldKind.culprit and hold.kind is HoldKind.culprit:
                upgraded.append(hold)
            else:
                renewed.append(hold)

        def ends(hold: NightHold) -> str:
            return (f"ends once no open incident names it and whole-fleet nights see it offered nowhere on "
                    f"{quiet_days_needed} day(s); or at once with: fleet holds release {hold.item}@{hold.version}")

        self._run([
            ("INSERT INTO night_holds (type, slug, version, name, reason, site, since, kind, last_offered, ends) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (type, slug, version) DO UPDATE SET "
             "name = excluded.name, reason = excluded.reason, site = excluded.site, since = excluded.since, "
             "kind = excluded.kind, last_offered = excluded.last_offered, ends = excluded.ends, released = NULL, "
             "quiet_days = 0, quiet_day = NULL, canary_run = NULL, canary_site = NULL",
             [(h.type.value, h.slug, h.version, h.name, h.reason, h.site, h.since.isoformat(), h.kind.value,
               h.since.isoformat(), ends(h)) for h in fresh]),
            ("UPDATE night_holds SET kind = ?, reason = ?, site = ?, quiet_days = 0, quiet_day = NULL, "
             "canary_run = NULL WHERE type = ? AND slug = ? AND version = ?",
             [(h.kind.value, h.reason, h.site, h.type.value, h.slug, h.version) for h in upgraded]),
            ("UPDATE night_holds SET quiet_days = 0, quiet_day = NULL, canary_run = NULL "
             "WHERE type = ? AND slug = ? AND version = ?",
             [(h.type.value, h.slug, h.version) for h in renewed]),
        ])
        return self.active()

    def release(self, item: str, why: str) -> list[NightHold]:
        """Release the active holds `item` names (`slug`, `type:slug`, optionally `@version`); returns them."""
        ref_text, _, version = item.partition("@")
        ref, rest = ItemRef.parse(ref_text)
        if rest:
            raise ValueError(f"{item!r}: name an item as slug, type:slug or type:slug@version")
        chosen = [hold for hold in self.active()
                  if ref.matches(hold.type, hold.slug, hold.name) and version.strip() in ("", hold.version)]
        self._end(chosen, why)
        return chosen

    def _end(self, holds: list[NightHold], why: str) -> None:
        self._run([("UPDATE night_holds SET released = ? WHERE type = ? AND slug = ? AND version = ?",
                    [(why, hold.type.value, hold.slug, hold.version) for hold in holds])])

    def weigh(self, evidence: Evidence) -> list[NightHold]:
        """Tonight's evidence on every active hold: an offer starts its quiet days over, a whole-fleet night that
        saw it offered nowhere counts its day (once per day however many such nights ran), an incident's culprit
        makes a suspect a culprit. The holds whose evidence has gone end; returns them. Each remaining hold says
        when it would end."""
        counted = {(t, s, v): day for t, s, v, day in self._run(  # the last day each one counted
            [], "SELECT type, slug, version, quiet_day FROM night_holds WHERE released IS NULL")}
        today = evidence.today.isoformat()
        ended, rows = [], []
        for hold in self.active():
            key = key_of(hold)
            quiet, last, day = hold.quiet_days, hold.last_offered, counted.get(key_values(key))
            if key in evidence.offered:
                quiet, last, day = 0, evidence.today, None
            elif evidence.whole_fleet and day != today:
                quiet, day = quiet + 1, today
            kind = HoldKind.culprit if key in evidence.culprits else hold.kind
            hold = hold.model_copy(update={"kind": kind, "quiet_days": quiet, "last_offered": last})
            ends_now = quiet >= evidence.quiet_days_needed and key not in evidence.named
            if ends_now:
                ended.append(hold)
            rows.append((kind.value, quiet, day, last.isoformat() if last else None,
                         "" if ends_now else ending(hold, evidence), *key_values(key)))
        self._run([("UPDATE night_holds SET kind = ?, quiet_days = ?, quiet_day = ?, last_offered = ?, ends = ? "
                    "WHERE type = ? AND slug = ? AND version = ?", rows)])
        self._end(ended, f"no open incident names it and whole-fleet nights saw it offered nowhere on "
                         f"{evidence.quiet_days_needed} day(s), the last on {today}")
        return ended

    def start_canaries(self, canaries: list[Canary], run_id: str) -> None:
        self._run([("UPDATE night_holds SET canary_run = ?, canary_site = ? "
                    "WHERE type = ? AND slug = ? AND version = ?",
                    [(run_id, canary.site_id, *key_values(canary.key)) for canary in canaries])])

    def settle_canaries(self, summary: Summary) -> list[NightHold]:
        """The suspects tried tonight on one site alone: released when that site got the version and stayed healthy
        (not broken, its check after the night passed); otherwise tried again another night. Returns the released
        holds."""
        rows = [row[1:] for row in self._run([], "SELECT canary_run, type, slug, version, canary_site FROM "
                                                 "night_holds WHERE released IS NULL AND canary_run IS NOT NULL")
                if row[0] == summary.run_id]
        if not rows:
            return []
        broken = {alarm.site_id for alarm in summary.broken}
        passed = {site.site_id for site in summary.sites if site.check is not None and site.check.healthy
                  and not site.check.unverified}  # a night without checks (update-fleet) proves nothing
        got = {(item.site_id, item.type, item.slug, item.to_version) for item in summary.items
               if item.outcome is Outcome.updated}
        active = {key_of(hold): hold for hold in self.active()}
        healthy, retry = [], []
        for type_, slug, version, site_id in rows:
            key = (UpdateType(type_), slug, version)
            hold = active.get(key)
            if hold is None or hold.kind is not HoldKind.suspect:
                continue  # found bad again tonight: a culprit now
            if (site_id, *key) in got and site_id not in broken and site_id in passed:
                healthy.append((hold, site_id))
            else:
                retry.append(key)
        self._run([("UPDATE night_holds SET canary_run = NULL, canary_site = NULL "
                    "WHERE type = ? AND slug = ? AND version = ?",
                    [key_values(key) for key in retry])])
        for hold, site_id in healthy:
            self._end([hold], f"the canary: installed alone on site {site_id} by run {summary.run_id}, "
                              "which stayed healthy")
        return [hold for hold, _ in healthy]


def key_values(key: VersionKey) -> tuple[str, str, str]:
    return (str(key[0]), key[1], key[2])


def ending(hold: NightHold, evidence: Evidence) -> str:
    """When `hold` would end, in words: the evidence still standing, then the days still needed."""
    release = f"or at once with: fleet holds release {hold.item}@{hold.version}"
    left = max(1, evidence.quiet_days_needed - hold.quiet_days)
    days = (f"once whole-fleet nights see it offered nowhere on {left} more day(s) (the earliest "
            f"{(evidence.today + timedelta(days=left - 1)).isoformat()})")
    incidents = evidence.named.get(key_of(hold))
    if incidents:
        days = f"once incident {', '.join(map(str, incidents))} is closed and whole-fleet nights see it offered " \
               f"nowhere on {left} more day(s)"
    canary = (" (a suspect: tried on one site alone once its break's culprit is known)"
              if hold.kind is HoldKind.suspect else "")
    return f"ends {days}{canary}; {release}"


def bad_versions(summary: Summary, failures_to_hold: int, today: date) -> list[NightHold]:
    """The versions this night found bad: each suspect applied to a broken site (its culprit, when the break has
    one or only one suspect), and each version that failed on `failures_to_hold` sites or more (0: failures
    alone never hold)."""
    found: dict[VersionKey, NightHold] = {}
    for alarm in summary.broken:
        culprit = alarm.containment.culprit if alarm.containment is not None else None
        revived = alarm.containment is not None and alarm.containment.status is ContainmentStatus.revived
        applied = [s for s in alarm.suspects if s.to_version and (
            s.outcome in (Outcome.updated, Outcome.not_switched_on) or revived)]
        for suspect in applied:
            is_culprit = len(applied) == 1 or (culprit is not None and (culprit.type, culprit.slug)
                                               == (suspect.type, suspect.slug))
            key = offered_key(suspect)
            known = found.get(key)
            if known is not None and (known.kind is HoldKind.culprit or not is_culprit):
                continue
            found[key] = NightHold(
                type=suspect.type, slug=suspect.slug, name=suspect.name, version=suspect.to_version or "",
                reason=f"{'broke' if is_culprit else 'applied with the break of'} "
                       f"{alarm.site_name or alarm.site_url}: {alarm.saw}",
                site=alarm.site_url, since=today, kind=HoldKind.culprit if is_culprit else HoldKind.suspect)
    if failures_to_hold:
        failed = [item for item in summary.items if item.to_version and (
            item.outcome is Outcome.failed or item.rule == Rule.rolled_back)]  # a remembered rollback failed there
        counts = Counter(offered_key(item) for item in failed)
        for item in failed:
            key = offered_key(item)
            if counts[key] >= failures_to_hold and key not in found:
                found[key] = NightHold(type=item.type, slug=item.slug, name=item.name, version=item.to_version or "",
                                       reason=f"failed on {counts[key]} sites: {item.reason or 'no reason given'}",
                                       site=item.site_url, since=today, kind=HoldKind.failures)
    return list(found.values())


def pick_canaries(items: list[PlanItem], holds: list[NightHold], cleared: frozenset[VersionKey]) -> list[Canary]:
    """For each suspect whose break's culprit is now known (its incident names another version as the culprit),
    the one site that tries it tonight alone: the first (by site id) the plan would apply it to that gets no other
    canary."""
    ready = {key_of(hold) for hold in holds if hold.kind is HoldKind.suspect and key_of(hold) in cleared}
    chosen: dict[VersionKey, Canary] = {}
    busy: set[int] = set()  # one canary per site, so that a break names its version
    for item in sorted(items, key=lambda item: item.site_id):
        key = offered_key(item)
        if key in ready and key not in chosen and item.decision is Decision.apply and item.site_id not in busy:
            chosen[key] = Canary(key, item.site_id)
            busy.add(item.site_id)
    return list(chosen.values())


def hold_remembered(items: list[PlanItem], holds: list[NightHold], canaries: list[Canary] = ()) -> list[PlanItem]:
    """The plan's items with the remembered versions held (but on a canary's own site)."""
    by_version = {key_of(hold): hold for hold in holds}
    trying = {(canary.site_id, *canary.key) for canary in canaries}
    decided = []
    for item in items:
        hold = by_version.get(offered_key(item))
        if hold is not None and item.decision is Decision.apply:
            if (item.site_id, item.type, item.slug, item.to_version or "") in trying:
                item = item.model_copy(update={"reason": f"a canary: held elsewhere as a suspect since "
                                                          f"{hold.since.isoformat()}, tried on this site alone"})
            else:
                item = item.model_copy(update={
                    "decision": Decision.held, "rule": Rule.night_hold,
                    "reason": f"held since {hold.since.isoformat()} ({hold.kind.value}): {hold.reason} "
                              f"(release: fleet holds release {hold.item}@{hold.version})"})
        decided.append(item)
    return decided


def hold_rolled_back(items: list[PlanItem], pending: list[DetectedUpdate]) -> list[PlanItem]:
    """The plan's items with every version MainWP remembers as rolled back (on any site) held: that version
    failed where it was tried, so it is sent nowhere. Each site that remembers it counts as one failure towards
    `hold_after_failures` (`bad_versions`)."""
    where: dict[VersionKey, set[int]] = {}
    for update in pending:
        if update.rolled_back and update.to_version:
            where.setdefault(offered_key(update), set()).add(update.site_id)
    decided = []
    for item in items:
        sites = where.get(offered_key(item))
        if sites and item.decision is Decision.apply:
            here = item.site_id in sites
            item = item.model_copy(update={
                "decision": Decision.held, "rule": Rule.rolled_back if here else Rule.rolled_back_elsewhere,
                "reason": f"held: WordPress rolled version {item.to_version} back on {len(sites)} site(s)"
                          f"{', this one included' if here else ''}, as the dashboard remembers; it is not sent "
                          "again until a newer version is offered"})
        decided.append(item)
    return decided
