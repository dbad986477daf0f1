"""SQLite persistence: one table of JSON records keyed by (kind, key); in memory when no path is given."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class RecordStore:
    """Write-through storage. Every mutation of the fleet is committed at once, so a restart loses nothing."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                # private from the start (SQLite gives its -wal and -shm files the same mode)
                os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
            self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL" if path else "PRAGMA journal_mode=MEMORY")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS records (kind TEXT NOT NULL, key TEXT NOT NULL, data TEXT NOT NULL,"
                " PRIMARY KEY (kind, key))"
            )
        except (sqlite3.Error, OSError) as error:
            raise ValueError(f"cannot use {path} as the emulator's database: {error}") from None

    def is_empty(self) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None

    def load(self, kind: str) -> dict[str, Any]:
        with self._lock:
            rows = self._db.execute("SELECT key, data FROM records WHERE kind = ?", (kind,)).fetchall()
        return {key: json.loads(data) for key, data in rows}

    def put(self, kind: str, key: str | int, data: Any) -> None:
        self.put_many(kind, [(key, data)])

    def put_many(self, kind: str, rows: Iterable[tuple[str | int, Any]]) -> None:
        encoded = [(kind, str(key), json.dumps(data, separators=(",", ":"))) for key, data in rows]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO records (kind, key, data) VALUES (?, ?, ?)", encoded)
            self._db.execute("COMMIT")

    def delete(self, kind: str, key: str | int) -> None:
        with self._lock:
            self._db.execute("DELETE FROM records WHERE kind = ? AND key = ?", (kind, str(key)))

    def close(self) -> None:
        with self._lock:
            self._db.close()
