"""What the pipeline sent, written down before it is sent: runs, write calls (intents) and batch jobs.

The dashboard has no guard against a second identical job, so a retried task or a re-run after a crash looks
here first and waits on the job already running instead of starting it again. A run killed mid-night leaves
its run open and its intents behind: the next run finds them, waits for those sites to be quiet, and accounts
for every item the killed run touched (`fleet.engine.interrupted`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from fleet.model.settings import DASHBOARD_JOB_TIMEOUT_SECONDS
from fleet.model.summary import UpdateType
from fleet.rules.execution import CallResult, UpdateCall
from fleet.rules.plan import PlanItem
from fleet.state.database import open_state_db
from fleet.state.processes import RunProcess

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL, type TEXT, started_at TEXT NOT NULL,
    site_ids TEXT NOT NULL, slugs TEXT NOT NULL, finished INTEGER NOT NULL DEFAULT 0
)""",
    """CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, run_dir TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT,
    accounted_by TEXT, host TEXT NOT NULL, pid INTEGER NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS intents (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, kind TEXT NOT NULL, type TEXT,
    items TEXT NOT NULL, sent_at TEXT NOT NULL, answered INTEGER NOT NULL DEFAULT 0
)""",
)

# columns added after the table's first release: an older journal gains them on first use
_ADDED_TO_RUNS = {"flow_run_id": "TEXT", "process_started": "REAL NOT NULL DEFAULT 0",
                  "tries": "INTEGER NOT NULL DEFAULT 0"}
ACCOUNTING_TRIES = 3  # runs that try to account for a killed run before it is closed with its items unknown

PlannedItem = tuple[int, str, str, str]  # (site id, slug, installed version, offered version) when planned


class JournalEntry(BaseModel):
    job_id: str
    run_id: str
    kind: str = Field(description="update, sync or check")
    type: UpdateType | None = None
    started_at: datetime
    site_ids: list[int]
    slugs: list[str] = Field(default_factory=list)
    finished: bool = False


class Intent(BaseModel):
    """One write call as it was about to be sent."""

    id: int
    run_id: str
    kind: str
    type: UpdateType | None = None
    items: list[PlannedItem]
    sent_at: datetime
    answered: bool

    @property
    def site_ids(self) -> list[int]:
        return sorted({site_id for site_id, *_ in self.items})


class OpenRun(BaseModel):
    """A run that started and never finished, with every write call it sent."""

    run_id: str
    run_dir: Path
    started_at: datetime
    intents: list[Intent] = Field(default_factory=list)
    flow_run_id: str | None = None  # its Prefect flow run, left Running by its killed process
    tries: int = 0  # runs before this one that took it over and did not finish

    @property
    def given_up(self) -> bool:
        """Taken over by as many runs as `ACCOUNTING_TRIES`, none of which finished: it is closed at once, its items
        unknown, so that what killed them does not pass it on for ever."""
        return self.tries >= ACCOUNTING_TRIES


class JobJournal:
    """The journal in the state file. One connection per journal, opened on first use: a night writes two rows
    per write call, and opening the file for each was most of their cost."""

    live: ClassVar[set[str]] = set()  # runs going on in this process (`fleet serve` runs several at once)

    def __init__(self, path: Path) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._answered: list[int] = []

    def _connect(self) -> None:
        if self._connection is None:
            connection = open_state_db(self.path)
            # WAL with NORMAL keeps every committed row through a killed process, without a sync per row
            connection.execute("PRAGMA synchronous=NORMAL")
            with connection:
                for statement in _SCHEMA:
                    connection.execute(statement)
                have = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
                for column, kind in _ADDED_TO_RUNS.items():
                    if column not in have:
                        connection.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
            self._connection = connection

    def _execute(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        self._connect()
        with self._connection:
            cursor = self._connection.execute(sql, parameters)
            rows = cursor.fetchall()
            self._last_id = cursor.lastrowid
            return rows

    def _execute_many(self, sql: str, rows: list[tuple]) -> None:
        self._connect()
        with self._connection:
            self._connection.executemany(sql, rows)

    def close(self) -> None:
        self.flush()
        if self._connection is not None:
            self._connection.close()
            self._connection = None

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

    # runs and intents

    def start_run(self, run_id: str, run_dir: Path, flow_run_id: str | None = None) -> None:
        JobJournal.live.add(run_id)
        process = RunProcess.this()
        self._execute("INSERT OR REPLACE INTO runs (run_id, run_dir, started_at, host, pid, flow_run_id, "
                      "process_started) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (run_id, str(run_dir), datetime.now(UTC).isoformat(), process.host, process.pid, flow_run_id,
                       process.started))

    def leave(self, run_id: str) -> None:
        """The run's process no longer works on it (finished, or failed: then the next run accounts for it)."""
        JobJournal.live.discard(run_id)

    def finish_run(self, run_id: str) -> None:
        """The run accounted for everything it sent: its intents are no longer needed."""
        self._execute("UPDATE runs SET finished_at = ? WHERE run_id = ?", (datetime.now(UTC).isoformat(), run_id))
        self._execute("DELETE FROM intents WHERE run_id = ?", (run_id,))

    def intend(self, run_id: str, kind: str, type_: UpdateType | None, items: list[PlannedItem]) -> int:
        """Write a call down before it is sent; returns the intent's id."""
        self._execute("INSERT INTO intents (run_id, kind, type, items, sent_at) VALUES (?, ?, ?, ?, ?)",
                      (run_id, kind, type_.value if type_ else None, json.dumps(items), datetime.now(UTC).isoformat()))
        return int(self._last_id)

    def answered(self, intent_id: int) -> None:
        """Noted now, written with the next `flush` (or `close`): a run killed before that leaves the intent
        unanswered, which only makes the next run wait for its sites to be quiet."""
        self._answered.append(intent_id)

    def flush(self) -> None:
        if self._answered:
            ids, self._answered = self._answered, []
            self._execute_many("UPDATE intents SET answered = 1 WHERE id = ?", [(i,) for i in ids])

    def open_runs(self, current: str) -> list[OpenRun]:
        """Runs other than `current` that never finished, whose process is gone, and that no later run has
        accounted for yet."""
        runs = self._execute("SELECT run_id, run_dir, started_at, host, pid, process_started, flow_run_id, tries "
                             "FROM runs WHERE finished_at IS NULL AND accounted_by IS NULL AND run_id != ? "
                             "ORDER BY started_at", (current,))
        found = []
        for run_id, run_dir, started, host, pid, process_started, flow_run_id, tries in runs:
            process = RunProcess(host, pid, process_started)
            if run_id in JobJournal.live or _still_running(process, datetime.fromisoformat(started)):
                continue
            rows = self._execute("SELECT id, kind, type, items, sent_at, answered FROM intents WHERE run_id = ? "
                                 "ORDER BY id", (run_id,))
            intents = [Intent(id=id_, run_id=run_id, kind=kind, type=type_,
                              items=[tuple(entry) for entry in json.loads(items)],
                              sent_at=datetime.fromisoformat(sent), answered=bool(answered))
                       for id_, kind, type_, items, sent, answered in rows]
            found.append(OpenRun(run_id=run_id, run_dir=Path(run_dir), started_at=datetime.fromisoformat(started),
                                 intents=intents, flow_run_id=flow_run_id, tries=tries))
        return found

    def taken_over(self, runs: list[OpenRun]) -> None:
        """A run takes the killed `runs` over: counted, so that runs killed while accounting for them do not pass
        them on for ever (`ACCOUNTING_TRIES`)."""
        self._execute_many("UPDATE runs SET tries = tries + 1 WHERE run_id = ?", [(run.run_id,) for run in runs])

    def accounted(self, run_id: str, by: str) -> None:
        """`by` accounted for the items of the interrupted `run_id`."""
        self._execute("UPDATE runs SET accounted_by = ? WHERE run_id = ?", (by, run_id))
        self._execute("DELETE FROM intents WHERE run_id = ?", (run_id,))


def _still_running(process: RunProcess, started: datetime) -> bool:
    """A run on this machine is alive while its process is; one elsewhere is taken as alive for a day (a run
    on another worker of the same work pool cannot be asked)."""
    if not process.here:
        return datetime.now(UTC) - started < timedelta(days=1)
    if process.pid == os.getpid():
        return False  # a run of this process that is no longer live: it ended badly
    return process.alive()


def reuse_running_jobs(
    items: list[PlanItem], type_: UpdateType, journal: JobJournal
) -> tuple[list[CallResult], list[PlanItem]]:
    """Attach items already covered by an unfinished journalled job to that job; return the rest."""
    reused, remaining = [], list(items)
    for entry in journal.open_jobs("update"):
        if entry.type is not type_:
            continue
        covered = {(site_id, slug) for site_id in entry.site_ids for slug in entry.slugs}
        mine = [item for item in remaining if (item.site_id, item.slug) in covered]
        if mine:
            sites = sorted({item.site_id for item in mine})
            reused.append(CallResult(call=UpdateCall(type=type_, site_ids=sites, slugs=entry.slugs),
                                     job_id=entry.job_id, reused=True))
            remaining = [item for item in remaining if (item.site_id, item.slug) not in covered]
    return reused, remaining
