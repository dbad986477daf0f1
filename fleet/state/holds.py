"""Where the nights' holds are kept: the state database beside the first-seen store. What they are, when one
is made, weighed, tried on a canary or ended is `fleet.rules.holds`'s; this only persists it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import date
from pathlib import Path

from fleet.model.keys import VersionKey
from fleet.model.summary import HoldKind, NightHold, Summary, UpdateType
from fleet.rules.holds import Canary, Evidence, canary_verdicts, ending, first_ending, hold_key, weigh, why_ended
from fleet.rules.policy import ItemRef
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
        active = {hold_key(hold): hold for hold in self.active()}
        fresh, upgraded, renewed = [], [], []
        for hold in holds:
            known = active.get(hold_key(hold))
            if known is None:
                fresh.append(hold)
            elif known.kind is not HoldKind.culprit and hold.kind is HoldKind.culprit:
                upgraded.append(hold)
            else:
                renewed.append(hold)

        self._run([
            ("INSERT INTO night_holds (type, slug, version, name, reason, site, since, kind, last_offered, ends) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (type, slug, version) DO UPDATE SET "
             "name = excluded.name, reason = excluded.reason, site = excluded.site, since = excluded.since, "
             "kind = excluded.kind, last_offered = excluded.last_offered, ends = excluded.ends, released = NULL, "
             "quiet_days = 0, quiet_day = NULL, canary_run = NULL, canary_site = NULL",
             [(h.type.value, h.slug, h.version, h.name, h.reason, h.site, h.since.isoformat(), h.kind.value,
               h.since.isoformat(), first_ending(h, quiet_days_needed)) for h in fresh]),
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
        """Tonight's evidence on every active hold (`fleet.rules.holds.weigh`); the holds whose evidence has gone
        end, and are returned. Each remaining hold says when it would end."""
        counted = {(t, s, v): day for t, s, v, day in self._run(  # the last day each one counted
            [], "SELECT type, slug, version, quiet_day FROM night_holds WHERE released IS NULL")}
        ended, rows = [], []
        for hold in self.active():
            key = hold_key(hold)
            weighed = weigh(hold, counted.get(key_values(key)), evidence)
            hold = weighed.hold
            if weighed.ends_now:
                ended.append(hold)
            rows.append((hold.kind.value, hold.quiet_days, weighed.quiet_day,
                         hold.last_offered.isoformat() if hold.last_offered else None,
                         "" if weighed.ends_now else ending(hold, evidence), *key_values(key)))
        self._run([("UPDATE night_holds SET kind = ?, quiet_days = ?, quiet_day = ?, last_offered = ?, ends = ? "
                    "WHERE type = ? AND slug = ? AND version = ?", rows)])
        self._end(ended, why_ended(evidence))
        return ended

    def start_canaries(self, canaries: list[Canary], run_id: str) -> None:
        self._run([("UPDATE night_holds SET canary_run = ?, canary_site = ? "
                    "WHERE type = ? AND slug = ? AND version = ?",
                    [(run_id, canary.site_id, *key_values(canary.key)) for canary in canaries])])

    def settle_canaries(self, summary: Summary) -> list[NightHold]:
        """The suspects tried tonight on one site alone (`fleet.rules.holds.canary_verdicts`): the healthy ones
        released, the others tried again another night. Returns the released holds."""
        tried = [((UpdateType(type_), slug, version), site_id) for run, type_, slug, version, site_id in self._run(
            [], "SELECT canary_run, type, slug, version, canary_site FROM night_holds "
                "WHERE released IS NULL AND canary_run IS NOT NULL") if run == summary.run_id]
        if not tried:
            return []
        healthy, retry = canary_verdicts(tried, self.active(), summary)
        self._run([("UPDATE night_holds SET canary_run = NULL, canary_site = NULL "
                    "WHERE type = ? AND slug = ? AND version = ?",
                    [key_values(key) for key in retry])])
        for hold, site_id in healthy:
            self._end([hold], f"the canary: installed alone on site {site_id} by run {summary.run_id}, "
                              "which stayed healthy")
        return [hold for hold, _ in healthy]


def key_values(key: VersionKey) -> tuple[str, str, str]:
    return (str(key[0]), key[1], key[2])
