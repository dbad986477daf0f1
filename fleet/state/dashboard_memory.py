"""Where each dashboard's memory lives: one SQLite file per dashboard, beside the home's own database.

Everything the service remembers across runs about a dashboard (the journal of runs, write calls and jobs, the
night lock, holds, incidents, first-seen dates, maintained window days, vulnerability history, rollback reads,
visual baselines) is kept in `<home>/dashboards/<key>/`, where the key is the dashboard's address without its scheme
(`dash.example.com`, `127.0.0.1-8080`): no run can read another dashboard's memory, whatever it asks. The home's
own database (FLEET_STATE_DB, default FLEET_HOME/fleet-state.sqlite) keeps only what is about WordPress rather than a
dashboard: the vulnerability feed's copy.

A home written before the split kept every dashboard's memory in its own database: the first run against each
dashboard takes that dashboard's share into its folder (`adopt_shared_memory`). A dashboard moved to a new address
keeps its memory with `fleet memory move OLD NEW`; a change of scheme only (http to https) or of a trailing slash
needs nothing: the key is the same, and the rows follow the new address on the next run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from fleet.model.settings import STATE_FILE
from fleet.model.vocabulary import count
from fleet.state.database import open_state_db

FOLDER = "dashboards"
RECORD = "dashboard.json"
LOCK_FILE = "night-lock.sqlite"
# the tables that belong to a dashboard; every other table of the home's database (the feed's copy) stays there
KEYED_TABLES = ("incidents", "maintained", "rollback_reads", "rollback_nights", "vuln_exposure")  # a `dashboard` column
JOURNAL_TABLES = ("runs", "intents", "jobs")
MEMORY_TABLES = (*KEYED_TABLES, *JOURNAL_TABLES, "night_holds", "first_seen")
_ADOPTED = "CREATE TABLE IF NOT EXISTS memory_adopted (dashboard TEXT PRIMARY KEY, folder TEXT NOT NULL, at TEXT)"
_NOT_IN_KEY = re.compile(r"[^a-z0-9._-]+")


class DashboardMemoryError(Exception):
    """A dashboard's memory cannot be found or moved as asked (one line: what and where)."""


def dashboard_key(base_url: str) -> str:
    """The folder name of a dashboard's memory: host, port and path of its REST prefix, without the scheme and
    the `/wp-json` every MainWP prefix ends in."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if not host:
        raise DashboardMemoryError(f"{base_url!r} is not a dashboard address (https://dash.example.com/wp-json)")
    path = parts.path.rstrip("/").removesuffix("/wp-json").strip("/")
    key = "-".join(part for part in (host, str(parts.port or ""), path.replace("/", "-")) if part)
    return _NOT_IN_KEY.sub("_", key.lower())


@dataclass(frozen=True)
class DashboardMemory:
    """One dashboard's memory: its folder, its database, and the address its rows are kept under."""

    home_db: Path  # the home's own database (the feed's copy); the folders sit beside it
    base_url: str

    def __post_init__(self) -> None:
        dashboard_key(self.base_url)  # an address that names no dashboard is said here, not at the first read

    @property
    def key(self) -> str:
        return dashboard_key(self.base_url)

    @property
    def folder(self) -> Path:
        return self.home_db.parent / FOLDER / self.key

    @property
    def path(self) -> Path:
        return self.folder / STATE_FILE

    @property
    def lock_path(self) -> Path:
        """The night lock's own small file: taking it never waits on a night's writes to the memory, and never
        creates the memory's database before the home's share is adopted into it."""
        return self.folder / LOCK_FILE

    def open(self) -> list[str]:
        """Make the folder ready for a run; returns what to say about it (a first run here, a share taken from the
        home's database, rows moved to a changed address), each in one line."""
        notes = []
        if not self.path.exists():
            others = [url for url in known_dashboards(self.home_db) if dashboard_key(url) != self.key]
            adopted = adopt_shared_memory(self.home_db, self.base_url, self.path)
            if adopted:
                notes.append(adopted)
            elif others:
                notes.append(f"this home ({self.home_db.parent}) keeps the memory of {', '.join(others)}; "
                             f"{self.base_url} is new here: its memory starts empty in {self.folder} and stays apart")
        recorded = self.recorded_url()
        open_state_db(self.path).close()  # the memory exists from its first run: a new dashboard is said once
        if recorded is not None and recorded != self.base_url:
            relabel(self.path, self.base_url)
            notes.append(f"the dashboard's address changed from {recorded} to {self.base_url}: its memory follows")
        if recorded != self.base_url:
            (self.folder / RECORD).write_text(json.dumps({"base_url": self.base_url, "since": _now()}, indent=2))
        return notes

    def recorded_url(self) -> str | None:
        try:
            return str(json.loads((self.folder / RECORD).read_text())["base_url"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def known_dashboards(home_db: Path) -> list[str]:
    """The addresses of the dashboards whose memory this home keeps (each folder's record), sorted."""
    urls = []
    for record in sorted((home_db.parent / FOLDER).glob(f"*/{RECORD}")):
        try:
            urls.append(str(json.loads(record.read_text())["base_url"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return urls


def relabel(path: Path, base_url: str) -> None:
    """Every row of a dashboard's own database is its own: kept under its present address."""
    if not path.exists():
        return
    with closing(sqlite3.connect(path, timeout=30)) as db, db:
        for table in _tables(db) & set(KEYED_TABLES):
            db.execute(f'UPDATE "{table}" SET dashboard = ?', (base_url,))  # noqa: S608 - our own names


def move_memory(home_db: Path, old_url: str, new_url: str) -> str:
    """Keep a moved dashboard's memory: its folder renamed to the new address's, its rows relabelled; returns the
    line to say. Refuses to mix it with a memory the new address already has."""
    old, new = DashboardMemory(home_db, old_url), DashboardMemory(home_db, new_url)
    if old.key == new.key:
        new.open()
        return f"{old_url} and {new_url} share one memory ({new.folder}): relabelled to {new_url}"
    if not old.folder.is_dir():
        raise DashboardMemoryError(f"no memory of {old_url} in {home_db.parent / FOLDER} (known: "
                                   f"{', '.join(known_dashboards(home_db)) or 'none'})")
    if new.path.exists():
        raise DashboardMemoryError(f"{new_url} already has a memory ({new.folder}): move or delete it first, the "
                                   "two are not mixed")
    new.folder.parent.mkdir(parents=True, exist_ok=True)
    if new.folder.exists():
        shutil.rmtree(new.folder)  # a folder without a database: nothing of a night in it
    old.folder.rename(new.folder)
    new.open()
    return f"the memory of {old_url} now serves {new_url} ({new.folder})"


def adopt_shared_memory(home_db: Path, base_url: str, target: Path) -> str | None:
    """From a home written before the split, this dashboard's share of the home's database, copied to `target`.

    The rows that name a dashboard go to theirs; the rest (holds, first-seen dates, the journal) go whole to the
    first dashboard when the home served only that one. A home that served several gives each the holds and
    first-seen dates (a hold is kept rather than lost), and its journal to none: its unfinished runs are named.
    Two runs of one dashboard may adopt at once: the share is made in a file of each run's own and put in place
    only if no other run put one there first."""
    if not home_db.is_file() or target.exists():
        return None
    key = dashboard_key(base_url)
    with closing(sqlite3.connect(home_db, timeout=30)) as home:
        with home:
            home.execute(_ADOPTED)
        tables = _tables(home) & set(MEMORY_TABLES)
        named = _named_dashboards(home, tables)
        done = {row[0] for row in home.execute("SELECT dashboard FROM memory_adopted")}
        if key in done or not _any_rows(home, tables) or (named and key not in named):
            return None
        shared = len(named) <= 1
        unfinished = [] if shared or "runs" not in tables else [row[0] for row in home.execute(
            "SELECT run_id FROM runs WHERE finished_at IS NULL AND accounted_by IS NULL")]
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.adopting-{os.getpid()}-{id(home)}")
        try:
            with closing(sqlite3.connect(partial)) as copy:
                home.backup(copy)
                with copy:
                    for table in _tables(copy) - tables - {"sqlite_sequence"}:  # the feed's copy stays the home's
                        copy.execute(f'DROP TABLE IF EXISTS "{table}"')
                    for table in tables & set(KEYED_TABLES):
                        for (url,) in copy.execute(f'SELECT DISTINCT dashboard FROM "{table}"').fetchall():  # noqa: S608
                            if _key_or_none(url) != key:
                                copy.execute(f'DELETE FROM "{table}" WHERE dashboard = ?', (url,))  # noqa: S608
                    if not shared:
                        for table in tables & set(JOURNAL_TABLES):
                            copy.execute(f'DELETE FROM "{table}"')  # noqa: S608
            try:
                os.link(partial, target)  # never over a memory another run of this dashboard put there first
            except FileExistsError:
                return None
        finally:
            partial.unlink(missing_ok=True)
        with home:
            home.execute("INSERT OR REPLACE INTO memory_adopted VALUES (?, ?, ?)", (key, str(target.parent), _now()))
    relabel(target, base_url)
    said = f"the memory of {base_url} was taken from {home_db} into {target.parent} (one folder per dashboard)"
    if unfinished:
        said += (f"; the home also served {', '.join(sorted(named - {key}))}, so it leaves unaccounted for its "
                 f"{count(len(unfinished), 'unfinished run')} ({', '.join(unfinished)}): no summary is written")
    return said


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _any_rows(db: sqlite3.Connection, tables: set[str]) -> bool:
    return any(db.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() for table in tables)  # noqa: S608


def _named_dashboards(db: sqlite3.Connection, tables: set[str]) -> set[str]:
    urls = {row[0] for table in tables & set(KEYED_TABLES)
            for row in db.execute(f'SELECT DISTINCT dashboard FROM "{table}"')}  # noqa: S608
    return {key for url in urls if (key := _key_or_none(url))}


def _key_or_none(url: str) -> str | None:
    try:
        return dashboard_key(url)
    except DashboardMemoryError:
        return None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
