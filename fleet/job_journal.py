"""Every batch job the pipeline starts, written down the moment the dashboard answers.

The dashboard has no guard against a second identical job, so a retried task or a re-run after a crash looks
here first and waits on the job already running instead of starting it again.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, Field

from fleet.first_seen import open_state_db
from fleet.settings import DASHBOARD_JOB_TIMEOUT_SECONDS
from fleet.summary import UpdateType

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL, type TEXT, started_at TEXT NOT NULL,
    site_ids TEXT NOT NULL, slugs TEXT NOT NULL, finished INTEGER NOT NULL DEFAULT 0
)
"""


class JournalEntry(BaseModel):
    job_id: str
    run_id: str
    kind: str = Field(description="update, sync or check")
    type: UpdateType | None = None
    started_at: datetime
    site_ids: list[int]
    slugs: list[str] = Field(default_factory=list)
    finished: bool = False


class JobJournal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _execute(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        connection = open_state_db(self.path)
        try:
            with connection:
                connection.execute(_SCHEMA)
                return connection.execute(sql, parameters).fetchall()
        finally:
            connection.close()

    def record(self, entry: JournalEntry) -> None:
        self._execute(
            "INSERT OR REPLACE INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.job_id,
                entry.run_id,
                entry.kind,
                entry.type.value if entry.type else None,
                entry.started_at.isoformat(),
                json.dumps(entry.site_ids),
                json.dumps(entry.slugs),
                int(entry.finished),
            ),
        )

    def finish(self, job_id: str) -> None:
        self._execute("UPDATE jobs SET finished = 1 WHERE job_id = ?", (job_id,))

    def open_jobs(self, kind: str, now: datetime | None = None) -> list[JournalEntry]:
        """Unfinished jobs of one kind young enough for the dashboard to still be running them."""
        now = now or datetime.now(UTC)
        since = (now - timedelta(seconds=DASHBOARD_JOB_TIMEOUT_SECONDS)).isoformat()
        rows = self._execute(
            "SELECT job_id, run_id, kind, type, started_at, site_ids, slugs, finished FROM jobs "
            "WHERE kind = ? AND finished = 0 AND started_at >= ? ORDER BY started_at",
            (kind, since),
        )
        return [
            JournalEntry(
                job_id=job_id,
                run_id=run_id,
                kind=kind_,
                type=type_,
                started_at=datetime.fromisoformat(started),
                site_ids=json.loads(site_ids),
                slugs=json.loads(slugs),
                finished=bool(finished),
            )
            for job_id, run_id, kind_, type_, started, site_ids, slugs, finished in rows
        ]
