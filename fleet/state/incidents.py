"""The nights' incidents: a site a night broke stays an open incident, across nights, until a later check passes and
nothing a night switched off on it is still off, or until an operator closes it with a reason.

Kept in the state database beside the holds, one row per incident (the `Incident` as JSON, with the columns the
lookups need), per dashboard: site ids are a dashboard's own.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from fleet.model.summary import Incident
from fleet.state.database import open_state_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT, dashboard TEXT NOT NULL, site_id INTEGER NOT NULL, closed_at TEXT,
    body TEXT NOT NULL
)
"""

_OPEN = "SELECT id, body FROM incidents WHERE closed_at IS NULL ORDER BY id"
_OPEN_ON = "SELECT id, body FROM incidents WHERE closed_at IS NULL AND dashboard = ? ORDER BY id"
_ALL = "SELECT id, body FROM incidents ORDER BY id"


class IncidentStore:
    """The `incidents` table of the pipeline's state file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _query(self, sql: str, values: tuple = ()) -> list[Incident]:
        with open_state_db(self.path) as connection:
            connection.execute(_SCHEMA)
            rows = connection.execute(sql, values).fetchall()
        connection.close()
        return [Incident.model_validate_json(body).model_copy(update={"id": row_id}) for row_id, body in rows]

    def open_incidents(self, dashboard: str | None = None) -> list[Incident]:
        """Open incidents, oldest first: of one dashboard, or of all."""
        if dashboard is None:
            return self._query(_OPEN)
        return self._query(_OPEN_ON, (dashboard,))

    def listed(self, include_closed: bool = False) -> list[Incident]:
        return self._query(_ALL if include_closed else _OPEN)

    def get(self, incident_id: int) -> Incident | None:
        found = self._query("SELECT id, body FROM incidents WHERE id = ?", (incident_id,))
        return found[0] if found else None

    def save(self, incident: Incident) -> Incident:
        """Insert a new incident (id 0: the store gives it one) or replace a known one; returns it with its id."""
        body = incident.model_dump_json(exclude={"id"})
        closed = incident.closed_at.isoformat() if incident.closed_at else None
        with open_state_db(self.path) as connection:
            connection.execute(_SCHEMA)
            if incident.id:
                connection.execute("UPDATE incidents SET closed_at = ?, body = ? WHERE id = ?",
                                   (closed, body, incident.id))
                row_id = incident.id
            else:
                cursor = connection.execute(
                    "INSERT INTO incidents (dashboard, site_id, closed_at, body) VALUES (?, ?, ?, ?)",
                    (incident.dashboard, incident.site_id, closed, body))
                row_id = cursor.lastrowid or 0
        connection.close()
        return incident.model_copy(update={"id": row_id})

    def close(self, incident_id: int, by: str, reason: str, at: datetime) -> Incident | None:
        """Close an open incident; None when there is no such open incident."""
        incident = self.get(incident_id)
        if incident is None or not incident.is_open:
            return None
        return self.save(incident.model_copy(update={"closed_at": at, "closed_by": by, "close_reason": reason}))
