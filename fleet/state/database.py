"""The pipeline's state database: one SQLite file that the first-seen store, the job journal, the night's holds
and the maintenance log share (`FLEET_STATE_DB`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_state_db(path: Path) -> sqlite3.Connection:
    """One connection to the pipeline's state file, created on first use."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=30)
    connection.execute("PRAGMA journal_mode=WAL")
    return connection
