"""The night's memory of bad versions: a version that broke a site, or failed on several, is held fleet-wide.

Kept in the state database beside the first-seen store. A hold stops exactly the remembered version of an item.
It stays while any site is still offered that version (a site whose updates lag behind is exactly the one that
would get it), so it ends only on a night that listed every site and found none offered it, or when an operator
releases it (`fleet holds release`). A newer release offered somewhere ends nothing.
The policy file's holds stay the operator's own; these are written and lifted by the nights.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import date
from pathlib import Path

from fleet.model.summary import NightHold, Outcome, Summary, UpdateType
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
_ACTIVE = ("SELECT type, slug, version, name, reason, site, since FROM night_holds WHERE released IS NULL "
           "ORDER BY since, type, slug")
_REMEMBER = (
    "INSERT INTO night_holds (type, slug, version, name, reason, site, since) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (type, slug, version) DO UPDATE SET reason = excluded.reason, site = excluded.site, "
    "since = excluded.since, released = NULL WHERE night_holds.released IS NOT NULL"
)


def _hold(row: tuple[str, ...]) -> NightHold:
    type_, slug, version, name, reason, site, since = row
    return NightHold(type=UpdateType(type_), slug=slug, version=version, name=name, reason=reason, site=site,
                     since=date.fromisoformat(since))


class HoldStore:
    """The `night_holds` table of the pipeline's state file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _run(self, statements: Iterable[tuple[str, list[tuple]]], query: str | None = None) -> list[tuple]:
        with open_state_db(self.path) as connection:
            connection.execute(_SCHEMA)
            for sql, rows in statements:
                connection.executemany(sql, rows)
            found = connection.execute(query).fetchall() if query else []
        connection.close()
        return found

    def active(self) -> list[NightHold]:
        return [_hold(row) for row in self._run([], _ACTIVE)]

    def remember(self, holds: list[NightHold]) -> list[NightHold]:
        """Hold each version (again, if an operator had released it); an active hold keeps its first reason."""
        self._run([(_REMEMBER, [(h.type.value, h.slug, h.version, h.name, h.reason, h.site, h.since.isoformat())
                                for h in holds])])
        return self.active()

    def release(self, item: str, why: str) -> list[NightHold]:
        """Release the active holds `item` names (`slug`, `type:slug`, optionally `@version`); returns them."""
        ref_text, _, version = item.partition("@")
        ref, rest = ItemRef.parse(ref_text)
        if rest:
            raise ValueError(f"{item!r}: name an item as slug, type:slug or type:slug@version")
        chosen = [hold for hold in self.active()
                  if ref.matches(hold.type, hold.slug, hold.name) and version.strip() in ("", hold.version)]
        self._run([("UPDATE night_holds SET released = ? WHERE type = ? AND slug = ? AND version = ?",
                    [(why, hold.type.value, hold.slug, hold.version) for hold in chosen])])
        return chosen


def bad_versions(summary: Summary, failures_to_hold: int, today: date) -> list[NightHold]:
    """The versions this night found bad: each suspect applied to a broken site, and each version that failed
    on `failures_to_hold` sites or more (0: failures alone never hold)."""
    found: dict[tuple[UpdateType, str, str], NightHold] = {}
    for alarm in summary.broken:
        for suspect in alarm.suspects:
            if suspect.to_version and suspect.outcome is Outcome.updated:
                found.setdefault((suspect.type, suspect.slug, suspect.to_version), NightHold(
                    type=suspect.type, slug=suspect.slug, name=suspect.name, version=suspect.to_version,
                    reason=f"broke {alarm.site_name or alarm.site_url}: {alarm.saw}", site=alarm.site_url,
                    since=today))
    if failures_to_hold:
        failed = [item for item in summary.items if item.to_version and (
            item.outcome is Outcome.failed or item.rule == Rule.rolled_back)]  # a remembered rollback failed there
        counts = Counter((item.type, item.slug, item.to_version) for item in failed)
        for item in failed:
            key = (item.type, item.slug, item.to_version)
            if counts[key] >= failures_to_hold and key not in found:
                found[key] = NightHold(type=item.type, slug=item.slug, name=item.name, version=item.to_version or "",
                                       reason=f"failed on {counts[key]} sites: {item.reason or 'no reason given'}",
                                       site=item.site_url, since=today)
    return list(found.values())


def hold_remembered(items: list[PlanItem], holds: list[NightHold]) -> list[PlanItem]:
    """The plan's items with the remembered versions held."""
    by_version = {(hold.type, hold.slug, hold.version): hold for hold in holds}
    decided = []
    for item in items:
        hold = by_version.get((item.type, item.slug, item.to_version or ""))
        if hold is not None and item.decision is Decision.apply:
            item = item.model_copy(update={
                "decision": Decision.held, "rule": Rule.night_hold,
                "reason": f"held since {hold.since.isoformat()}: {hold.reason} "
                          f"(release: fleet holds release {hold.item}@{hold.version})"})
        decided.append(item)
    return decided


def holds_ended(holds: list[NightHold], items: list[PlanItem]) -> list[NightHold]:
    """The holds whose version none of `items` (every item detected on every site, pending or ignored) is
    offered any more. Only a night that listed the whole fleet may end a hold with them."""
    offered = {(item.type, item.slug, item.to_version) for item in items}
    return [hold for hold in holds if (hold.type, hold.slug, hold.version) not in offered]


def hold_rolled_back(items: list[PlanItem], pending: list[DetectedUpdate]) -> list[PlanItem]:
    """The plan's items with every version MainWP remembers as rolled back (on any site) held: that version
    failed where it was tried, so it is sent nowhere. Each site that remembers it counts as one failure towards
    `hold_after_failures` (`bad_versions`)."""
    where: dict[tuple[UpdateType, str, str], set[int]] = {}
    for update in pending:
        if update.rolled_back and update.to_version:
            where.setdefault((update.type, update.slug, update.to_version), set()).add(update.site_id)
    decided = []
    for item in items:
        sites = where.get((item.type, item.slug, item.to_version or ""))
        if sites and item.decision is Decision.apply:
            here = item.site_id in sites
            item = item.model_copy(update={
                "decision": Decision.held, "rule": Rule.rolled_back if here else Rule.rolled_back_elsewhere,
                "reason": f"held: WordPress rolled version {item.to_version} back on {len(sites)} site(s)"
                          f"{', this one included' if here else ''}, as the dashboard remembers; it is not sent "
                          "again until a newer version is offered"})
        decided.append(item)
    return decided
