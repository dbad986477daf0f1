"""When each update was first seen, so that a minimum age can be enforced (a small SQLite file beside the reports).

Keyed fleet-wide by (type, slug, offered version): the age of a release does not depend on which site offers it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from pathlib import Path

from fleet.model.release import UpdateKey
from fleet.state.database import open_state_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS first_seen (
    type TEXT NOT NULL, slug TEXT NOT NULL, version TEXT NOT NULL, seen TEXT NOT NULL,
    PRIMARY KEY (type, slug, version)
)
"""


class FirstSeenStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def known(self, keys: Iterable[UpdateKey], today: date) -> dict[UpdateKey, date]:
        """Each key's first-seen date as `record` would give it, writing nothing: `today` for a key never seen."""
        wanted = set(keys)
        if not self.path.exists():
            return dict.fromkeys(wanted, today)
        with open_state_db(self.path) as connection:
            connection.execute(_SCHEMA)
            rows = connection.execute("SELECT type, slug, version, seen FROM first_seen").fetchall()
        connection.close()
        seen = {(type_, slug, version): date.fromisoformat(day) for type_, slug, version, day in rows}
        return {key: seen.get(key, today) for key in wanted}

    def record(self, keys: Iterable[UpdateKey], today: date) -> dict[UpdateKey, date]:
        """Remember `today` for keys never seen before; return the first-seen date of every key."""
        wanted = set(keys)
        with open_state_db(self.path) as connection:
            connection.execute(_SCHEMA)
            connection.executemany(
                "INSERT OR IGNORE INTO first_seen (type, slug, version, seen) VALUES (?, ?, ?, ?)",
                [(*key, today.isoformat()) for key in wanted],
            )
            rows = connection.execute("SELECT type, slug, version, seen FROM first_seen").fetchall()
        connection.close()
        return {
            (type_, slug, version): date.fromisoformat(seen)
            for type_, slug, version, seen in rows
            if (type_, slug, version) in wanted
        }
