"""Which day each site was last maintained, so that hourly runs maintain a site at most once per window day
(a table in the pipeline's state database, beside the first-seen store and the job journal)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from fleet.state.database import open_state_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS maintained (
    dashboard TEXT NOT NULL, site_id INTEGER NOT NULL, day TEXT NOT NULL, run_id TEXT NOT NULL,
    PRIMARY KEY (dashboard, site_id)
)
"""


class MaintenanceLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def last_days(self, dashboard: str) -> dict[int, date]:
        """The window day each site of this dashboard was last maintained on."""
        with open_state_db(self.path) as connection:
            connection.execute(_SCHEMA)
            rows = connection.execute("SELECT site_id, day FROM maintained WHERE dashboard = ?", (dashboard,))
            days = {site_id: date.fromisoformat(day) for site_id, day in rows}
        connection.close()
        return days

    def record(self, dashboard: str, days: dict[int, date], run_id: str) -> None:
        with open_state_db(self.path) as connection:
            connection.execute(_SCHEMA)
            connection.executemany(
                "INSERT OR REPLACE INTO maintained (dashboard, site_id, day, run_id) VALUES (?, ?, ?, ?)",
                [(dashboard, site_id, day.isoformat(), run_id) for site_id, day in days.items()],
            )
        connection.close()
