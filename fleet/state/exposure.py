"""Each site's known vulnerabilities across nights: when first seen here, when a fix was first offered, when
patched (installed, or gone from the site: removed or mitigated), so that time exposed and its fixable part are
measured. Keyed by dashboard, site, item and vulnerability; a dry run records nothing."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from fleet.model.vulnerability import ExposureStats, Wait, published_at
from fleet.state.database import open_state_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vuln_exposure (
    dashboard TEXT NOT NULL, site_id INTEGER NOT NULL, type TEXT NOT NULL, slug TEXT NOT NULL, vuln_id TEXT NOT NULL,
    cve TEXT, published TEXT, first_seen TEXT NOT NULL, fix_offered TEXT, patched TEXT,
    PRIMARY KEY (dashboard, site_id, type, slug, vuln_id)
)
"""

Seen = tuple[int, str, str, str, str | None, str | None, bool]  # site, type, slug, vuln id, cve, published, fixable
Key = tuple[int, str, str, str]  # site, type, slug, vuln id


class ExposureStore:
    def __init__(self, path: Path) -> None:
        self._db = open_state_db(path)
        self._db.execute(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def record(self, dashboard: str, now: datetime, seen: Iterable[Seen], patched: Iterable[Key],
               looked_at: set[int]) -> dict[tuple[int, str, str], float]:
        """Tonight's look: `seen` still exposed (a fix offered or not), `patched` installed tonight; an open one
        of a site looked at that is neither seen nor patched is gone from it (removed, or fixed by other hands).
        Returns, for each item patched tonight, the hours its site waited for it: from the fix first offered there
        to tonight (the longest of the vulnerabilities it fixes)."""
        stamp = now.isoformat()
        seen, patched = list(seen), list(patched)
        with self._db:
            self._db.executemany(
                "INSERT INTO vuln_exposure (dashboard, site_id, type, slug, vuln_id, cve, published, first_seen) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET patched = NULL, "  # open again:
                "fix_offered = CASE WHEN patched IS NULL THEN fix_offered END",  # its wait starts anew
                [(dashboard, site, type_, slug, vuln, cve, published, stamp)
                 for site, type_, slug, vuln, cve, published, _ in seen])
            self._db.executemany(
                "UPDATE vuln_exposure SET fix_offered = COALESCE(fix_offered, ?) WHERE dashboard = ? AND site_id = ? "
                "AND type = ? AND slug = ? AND vuln_id = ?",
                [(stamp, dashboard, site, type_, slug, vuln) for site, type_, slug, vuln, *_, fixable in seen
                 if fixable])
            self._db.executemany(
                "UPDATE vuln_exposure SET fix_offered = COALESCE(fix_offered, ?), patched = ? WHERE dashboard = ? "
                "AND site_id = ? AND type = ? AND slug = ? AND vuln_id = ? AND patched IS NULL",
                [(stamp, stamp, dashboard, *key) for key in patched])
            still = {(site, type_, slug, vuln) for site, type_, slug, vuln, *_ in seen}
            rows = self._db.execute("SELECT site_id, type, slug, vuln_id FROM vuln_exposure WHERE dashboard = ? AND "
                                    "patched IS NULL", (dashboard,)).fetchall()
            gone = [key for key in map(tuple, rows) if key not in still and key[0] in looked_at]
            self._db.executemany(
                "UPDATE vuln_exposure SET patched = ? WHERE dashboard = ? AND site_id = ? AND type = ? AND slug = ? "
                "AND vuln_id = ?", [(stamp, dashboard, *key) for key in gone])
            waited: dict[tuple[int, str, str], float] = {}
            for site, type_, slug, vuln in patched:
                row = self._db.execute(
                    "SELECT fix_offered FROM vuln_exposure WHERE dashboard = ? AND site_id = ? AND type = ? AND "
                    "slug = ? AND vuln_id = ? AND patched = ?", (dashboard, site, type_, slug, vuln, stamp)).fetchone()
                if row and row[0]:
                    hours = (now - datetime.fromisoformat(row[0])).total_seconds() / 3600
                    waited[(site, type_, slug)] = max(hours, waited.get((site, type_, slug), 0.0))
        return waited

    def new_tonight(self, dashboard: str, now: datetime) -> tuple[set[Key], set[Key]]:
        """What tonight's look (`record` at `now`) saw for the first time: (vulnerabilities first seen with no fix
        offered, fixes first offered and not installed). Nothing on the dashboard's first night with the feed:
        everything is new then, and the report lists it."""
        stamp = now.isoformat()
        known = self._db.execute("SELECT 1 FROM vuln_exposure WHERE dashboard = ? AND first_seen < ? LIMIT 1",
                                 (dashboard, stamp)).fetchone()
        if known is None:
            return set(), set()
        rows = self._db.execute(
            "SELECT site_id, type, slug, vuln_id, first_seen, fix_offered, patched FROM vuln_exposure WHERE "
            "dashboard = ? AND patched IS NULL AND (first_seen = ? OR fix_offered = ?)",
            (dashboard, stamp, stamp)).fetchall()
        no_fix = {tuple(row[:4]) for row in rows if row[4] == stamp and row[5] is None}
        not_installed = {tuple(row[:4]) for row in rows if row[5] == stamp}
        return no_fix, not_installed  # type: ignore[return-value]

    def stats(self, dashboard: str, now: datetime | None = None) -> ExposureStats:
        """The measures at `now` (the night's end): open, the open ones' age without a fix, and each patched one's
        time from the advisory's publication, from the fix's (first offered to any site here) and from the fix
        first offered to its site."""
        rows = self._db.execute(
            "SELECT site_id, type, slug, vuln_id, published, first_seen, fix_offered, patched, MIN(fix_offered) OVER "
            "(PARTITION BY type, slug, vuln_id) FROM vuln_exposure WHERE dashboard = ?", (dashboard,)).fetchall()
        now = now or datetime.now(UTC)
        still = [row for row in rows if row[7] is None]
        no_fix = [row for row in still if row[6] is None]
        ages = [(now - (published_at(published) or datetime.fromisoformat(first))).total_seconds() / 86400
                for *_, published, first, _fix, _patched, _ in no_fix]
        done = [row for row in rows if row[7] is not None and row[6] is not None]

        def hours(start: str | None, end: str) -> float | None:
            begun = published_at(start)
            return None if begun is None else max(0.0, (datetime.fromisoformat(end) - begun).total_seconds() / 3600)

        stats = ExposureStats(open=len(still), open_sites=len({row[0] for row in still}),
                              open_fixable=len(still) - len(no_fix), no_fix=len(no_fix), patched=len(done),
                              since_published=Wait.of([h for row in done if (h := hours(row[4], row[7])) is not None]),
                              since_fix=Wait.of([h for row in done if (h := hours(row[8], row[7])) is not None]),
                              since_offered=Wait.of([h for row in done if (h := hours(row[6], row[7])) is not None]))
        if ages:
            stats.no_fix_median_days, stats.no_fix_oldest_days = statistics.median(ages), max(ages)
        return stats
