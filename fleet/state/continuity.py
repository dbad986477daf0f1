"""The nights' memory found where the last night left it: a state database from before FLEET_HOME is moved into
the home, and a dashboard's empty memory where its last night left holds is said out loud, since a night that
silently forgets its holds sends a version that broke a site to the next one."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from fleet.model.settings import STATE_FILE, PipelineSettings
from fleet.model.summary import Summary, run_directories
from fleet.model.vocabulary import count

MOVED_SUFFIX = ".moved-to-home"


def legacy_state_files(settings: PipelineSettings) -> list[Path]:
    """Where the state database lived before FLEET_HOME: beside the reports, under the working directory or
    FLEET_REPORT_DIR. Only looked at when FLEET_STATE_DB does not name the file."""
    if settings.state_db is not None:
        return []
    places = [Path.cwd() / "reports" / STATE_FILE, settings.report_dir / STATE_FILE]
    found = []
    for place in places:
        if place.is_file() and place.resolve() != settings.home_state_path.resolve() and place.resolve() not in found:
            found.append(place.resolve())
    return found


def adopt_legacy_state(settings: PipelineSettings) -> str | None:
    """Copy an old state database into the home (SQLite's own backup: the WAL's pages too) when the home has none,
    and rename the old one so it is not found again; says what it did (or what it left, when the home has one)."""
    legacy = legacy_state_files(settings)
    if not legacy:
        return None
    target = settings.home_state_path
    if target.exists():
        return (f"an older state database was left at {legacy[0]}: the nights use {target} (FLEET_HOME); move or "
                "delete the old one once you no longer need it")
    target.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(legacy[0])) as old, closing(sqlite3.connect(target)) as new:
        old.backup(new)
    moved = legacy[0].with_name(legacy[0].name + MOVED_SUFFIX)
    legacy[0].rename(moved)
    for sidecar in ("-wal", "-shm"):
        legacy[0].with_name(legacy[0].name + sidecar).unlink(missing_ok=True)
    return f"the state database moved from {legacy[0]} to {target} (FLEET_HOME); the old file is now {moved.name}"


def state_is_empty(path: Path) -> bool:
    """No file, or no row in any of its tables (read without creating anything)."""
    if not path.is_file():
        return True
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return not any(connection.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone()  # noqa: S608 - its own
                       for table in tables)


def forgotten_holds(settings: PipelineSettings, dashboard: str) -> str | None:
    """A warning when the dashboard's memory is empty although its last night's summary lists holds."""
    if not state_is_empty(settings.state_path):
        return None
    last = next((run for run in reversed(run_directories(settings.report_dir))
                 if Summary.read(run).dashboard == dashboard), None)
    holds = Summary.read(last).holds if last is not None else []
    if not holds:
        return None
    named = ", ".join(f"{hold.slug} {hold.version}" for hold in holds[:5]) + (", ..." if len(holds) > 5 else "")
    return (f"the memory of {dashboard} ({settings.state_path}) is empty, but its last night ({last.name}) held "
            f"{count(len(holds), 'version')} ({named}), not held now. If the nights' memory is elsewhere, "
            "point FLEET_HOME or FLEET_STATE_DB at it")
