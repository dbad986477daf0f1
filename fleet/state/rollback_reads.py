"""Which sites' rollback memory the night reads: MainWP remembers a version WordPress rolled back only on a site
where an update of it failed, so a site where the nights saw nothing fail has nothing there the night does not
already know.

Reading it costs one `GET /updates/{id}` per site (about 1,000 of the 2,300 requests of a 1,000-site night). The
first night of a dashboard reads every site offered a plugin or theme (updates made before, by hand or by
WordPress's own auto-updates, may have been rolled back); later nights read only the sites where a night saw an
item fail, end unknown or be held as rolled back, until a night reads their memory and finds it empty. A rollback
from an update made outside the nights on a site where they saw none is found by the dashboard's own lists (the
version is offered again) and, when the night tries it, by its failure: from then on the site is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from fleet.state.database import open_state_db

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS rollback_reads (dashboard TEXT NOT NULL, site_id INTEGER NOT NULL, "
    "PRIMARY KEY (dashboard, site_id))",
    "CREATE TABLE IF NOT EXISTS rollback_nights (dashboard TEXT PRIMARY KEY)",
)


class RollbackReads:
    def __init__(self, path: Path, dashboard: str) -> None:
        self.path, self.dashboard = path, dashboard

    def _open(self):  # noqa: ANN202 - sqlite3.Connection
        connection = open_state_db(self.path)
        for statement in _SCHEMA:
            connection.execute(statement)
        return connection

    def sites(self) -> frozenset[int] | None:
        """The sites to read tonight; None: every site (no night of this dashboard has been recorded yet)."""
        connection = self._open()
        with connection:
            known = connection.execute("SELECT 1 FROM rollback_nights WHERE dashboard = ?",
                                       (self.dashboard,)).fetchone()
            rows = connection.execute("SELECT site_id FROM rollback_reads WHERE dashboard = ?",
                                      (self.dashboard,)).fetchall()
        connection.close()
        return frozenset(site_id for (site_id,) in rows) if known else None

    def record(self, read: Iterable[int], remembering: Iterable[int], troubled: Iterable[int]) -> None:
        """After a night: the sites it read whose memory was empty leave the list; those whose memory holds a
        version, and those where an item failed, ended unknown or was held as rolled back, join it."""
        stay = set(remembering) | set(troubled)
        connection = self._open()
        with connection:
            connection.execute("INSERT OR IGNORE INTO rollback_nights (dashboard) VALUES (?)", (self.dashboard,))
            connection.executemany("DELETE FROM rollback_reads WHERE dashboard = ? AND site_id = ?",
                                   [(self.dashboard, site_id) for site_id in set(read) - stay])
            connection.executemany("INSERT OR IGNORE INTO rollback_reads (dashboard, site_id) VALUES (?, ?)",
                                   [(self.dashboard, site_id) for site_id in stay])
        connection.close()
