"""The vulnerability feed's last good copy in the state database, indexed by (type, slug), with when it was read.

A new copy is written beside the live one (`vuln_software_staging`) and swapped in by one transaction only once
the whole feed was read: a download cut off, broken JSON or an empty feed leave the live copy as it was. An odd
record keeps its previous rows (`carry_over`). The staging table is committed in batches, so that other writers of
the state database never wait on a whole download.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from fleet.model.vulnerability import AffectedSoftware, FeedRange, FeedStatus, Vulnerability
from fleet.state.database import open_state_db

_COLUMNS = """(vuln_id TEXT NOT NULL, type TEXT NOT NULL, slug TEXT NOT NULL, from_version TEXT NOT NULL,
    from_inclusive INTEGER NOT NULL, to_version TEXT NOT NULL, to_inclusive INTEGER NOT NULL, patched INTEGER NOT NULL,
    patched_versions TEXT NOT NULL, title TEXT NOT NULL, cve TEXT, cvss_score REAL, cvss_rating TEXT,
    published TEXT)"""
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS vuln_software {_COLUMNS};
CREATE INDEX IF NOT EXISTS vuln_software_by_slug ON vuln_software (type, slug);
CREATE TABLE IF NOT EXISTS vuln_feed (
    id INTEGER PRIMARY KEY CHECK (id = 1), source TEXT, fetched_at TEXT, records INTEGER NOT NULL DEFAULT 0,
    skipped TEXT NOT NULL DEFAULT '[]', problem TEXT, attempted_at TEXT, not_before TEXT
);
INSERT OR IGNORE INTO vuln_feed (id) VALUES (1);
"""  # noqa: S608 - constant text only
# the settings the last read was made with (`FeedSettings.fingerprint`): added after the table's first release
_READ_WITH = "ALTER TABLE vuln_feed ADD COLUMN read_with TEXT"
_INSERT_STAGING = "INSERT INTO vuln_software_staging VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_LOOKUP_CHUNK = 400


def _rows(entries: Iterable[AffectedSoftware]) -> Iterator[tuple]:
    """One row per affected range (most entries have one)."""
    for entry in entries:
        v, patched = entry.vulnerability, json.dumps(entry.patched_versions)
        for r in entry.ranges:
            yield (v.id, entry.type, entry.slug, r.from_version, int(r.from_inclusive), r.to_version,
                   int(r.to_inclusive), int(entry.patched), patched, v.title, v.cve, v.cvss_score, v.cvss_rating,
                   v.published)


class VulnerabilityStore:
    def __init__(self, path: Path) -> None:
        self._db: sqlite3.Connection = open_state_db(path)
        self._db.executescript(_SCHEMA)
        if "read_with" not in {row[1] for row in self._db.execute("PRAGMA table_info(vuln_feed)")}:
            self._db.execute(_READ_WITH)
            self._db.commit()

    def close(self) -> None:
        self._db.close()

    # --- the feed's state -------------------------------------------------------------------------------------

    def status(self) -> FeedStatus:
        source, fetched_at, records, skipped, problem = self._db.execute(
            "SELECT source, fetched_at, records, skipped, problem FROM vuln_feed").fetchone()
        return FeedStatus(source=source or "", fetched_at=fetched_at, records=records, skipped=json.loads(skipped),
                          problem=problem)

    def due(self, now: datetime, every_seconds: float, read_with: str) -> bool:
        """Time to read the feed again: the settings changed since the last read (`read_with`: another source or
        key), or the last read failed (past any Retry-After it asked for), or the copy is older than
        `every_seconds`."""
        fetched_at, problem, not_before, last_with = self._db.execute(
            "SELECT fetched_at, problem, not_before, read_with FROM vuln_feed").fetchone()
        if last_with != read_with:
            return True
        if not_before and now < datetime.fromisoformat(not_before):
            return False
        if problem or fetched_at is None:
            return True
        return (now - datetime.fromisoformat(fetched_at)).total_seconds() >= every_seconds

    def failed(self, problem: str, now: datetime, not_before: datetime | None, read_with: str) -> None:
        """A read that failed: said once, the live copy (and the source it came from) untouched; read again on the
        next run, past `not_before` when the feed asked for it."""
        self._db.execute("DROP TABLE IF EXISTS vuln_software_staging")
        self._db.execute("UPDATE vuln_feed SET problem = ?, attempted_at = ?, not_before = ?, read_with = ?",
                         (problem, now.isoformat(), not_before.isoformat() if not_before else None, read_with))
        self._db.commit()

    # --- writing a new copy -----------------------------------------------------------------------------------

    def start_copy(self) -> None:
        self._db.execute("DROP TABLE IF EXISTS vuln_software_staging")
        self._db.execute(f"CREATE TABLE vuln_software_staging {_COLUMNS}")
        self._db.commit()

    def add(self, entries: Iterable[AffectedSoftware]) -> None:
        self._db.executemany(_INSERT_STAGING, _rows(entries))
        self._db.commit()

    def carry_over(self, vuln_id: str) -> None:
        """An odd record: its rows of the live copy go on into the new one."""
        self._db.execute("INSERT INTO vuln_software_staging SELECT * FROM vuln_software WHERE vuln_id = ?",
                         (vuln_id,))

    def swap_in(self, source: str, fetched_at: datetime, records: int, skipped: list[str], read_with: str) -> None:
        """The new copy becomes the live one, in one transaction."""
        with self._db:
            self._db.execute("DROP TABLE vuln_software")
            self._db.execute("ALTER TABLE vuln_software_staging RENAME TO vuln_software")
            self._db.execute("CREATE INDEX vuln_software_by_slug ON vuln_software (type, slug)")
            self._db.execute(
                "UPDATE vuln_feed SET source = ?, fetched_at = ?, records = ?, skipped = ?, problem = NULL, "
                "attempted_at = ?, not_before = NULL, read_with = ?",
                (source, fetched_at.isoformat(), records, json.dumps(skipped), fetched_at.isoformat(), read_with))

    # --- reading -----------------------------------------------------------------------------------------------

    def affecting(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list[FeedRange]]:
        """Every affected range of the live copy for these (type, slug) pairs (slugs compared lowercase)."""
        by_type: dict[str, list[str]] = {}
        for type_, slug in {(type_, slug.lower()) for type_, slug in keys}:
            by_type.setdefault(type_, []).append(slug)
        found: dict[tuple[str, str], list[FeedRange]] = {}
        vulnerabilities: dict[str, Vulnerability] = {}
        for type_, slugs in by_type.items():
            for start in range(0, len(slugs), _LOOKUP_CHUNK):
                chunk = slugs[start:start + _LOOKUP_CHUNK]
                marks = ", ".join("?" * len(chunk))
                rows = self._db.execute(
                    "SELECT slug, vuln_id, from_version, from_inclusive, to_version, to_inclusive, title, cve, "  # noqa: S608 - placeholders only
                    f"cvss_score, cvss_rating, published FROM vuln_software WHERE type = ? AND slug IN ({marks})",
                    [type_, *chunk])
                for slug, vuln_id, low, low_in, high, high_in, title, cve, score, rating, published in rows:
                    vulnerability = vulnerabilities.get(vuln_id)
                    if vulnerability is None:
                        vulnerability = vulnerabilities[vuln_id] = Vulnerability(
                            vuln_id, title, cve, score, rating, published)
                    found.setdefault((type_, slug), []).append(
                        FeedRange(vulnerability, low, bool(low_in), high, bool(high_in)))
        return found
