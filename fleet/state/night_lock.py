"""A dashboard's night lock: one run at a time writes to a dashboard (its nights, its fan-out's, its security runs).

The lock is a row in the dashboard's own memory, naming its holder's process. It is free when no row is there, or
when the holder is dead: on this machine, as soon as its process is gone (whatever killed it: a reboot, an OOM kill,
SIGKILL); on another machine sharing the home, once the holder has not renewed it for `LEASE` (the holder renews it
every `RENEW`). It does not depend on a Prefect server: a temporary server started for each `fleet nightly` keeps
no lease from one night to the next, and a Prefect server restarted mid-night forgets every lease it held, so a
Prefect concurrency slot taken by a killed night was never given back (issue 48).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleet.state.database import open_state_db
from fleet.state.processes import RunProcess

LEASE = timedelta(seconds=120)  # a holder on another machine that has not renewed for this long is dead
RENEW = LEASE / 6

_SCHEMA = """CREATE TABLE IF NOT EXISTS night_lock (
    lock TEXT PRIMARY KEY, holder TEXT NOT NULL, since TEXT NOT NULL, renewed TEXT NOT NULL
)"""


class NightBusy(RuntimeError):
    """Another live run of the dashboard held its night lock for longer than the wait: this one did not start."""


@dataclass(frozen=True)
class Holder:
    """Who holds the lock: its run (a Prefect flow run id, or a name), what it is, and its process."""

    run: str
    what: str  # "nightly-maintenance", "security-patch", "maintain-dashboards", ...
    process: RunProcess
    since: datetime
    flow_run_id: str | None = None  # the Prefect flow run to mark crashed when the holder is found dead

    def said(self) -> str:
        return (f"{self.what} run {self.run} (process {self.process.pid} on {self.process.host}, since "
                f"{self.since:%Y-%m-%d %H:%M:%S} UTC)")


@dataclass(frozen=True)
class Taken:
    """The lock was taken; `replaced` is a dead holder it was taken from, if any."""

    replaced: Holder | None = None


@dataclass(frozen=True)
class Refused:
    """Another holder is alive."""

    holder: Holder


class NightLock:
    """The lock of the dashboard whose memory is `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        connection = open_state_db(self.path)
        connection.isolation_level = None  # transactions by hand: BEGIN IMMEDIATE takes the file's write lock
        connection.execute(_SCHEMA)
        return connection

    def take(self, me: Holder, now: datetime | None = None) -> Taken | Refused:
        """Take the lock if it is free or its holder is dead; in one transaction, so two runs never both take it."""
        now = now or datetime.now(UTC)
        connection = self._connect()
        try:
            connection.execute("BEGIN IMMEDIATE")
            row = connection.execute("SELECT holder, renewed FROM night_lock WHERE lock = 'night'").fetchone()
            held = _holder(row[0]) if row else None
            if held is not None and held.run != me.run and alive(held, datetime.fromisoformat(row[1]), now):
                connection.execute("ROLLBACK")
                return Refused(held)
            connection.execute("INSERT OR REPLACE INTO night_lock VALUES ('night', ?, ?, ?)",
                                (_stored(me), me.since.isoformat(), now.isoformat()))
            connection.execute("COMMIT")
            return Taken(replaced=held if held is not None and held.run != me.run else None)
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        finally:
            connection.close()

    def renew(self, me: Holder, now: datetime | None = None) -> bool:
        """Still ours: renewed. False when another run took it (this one was taken for dead)."""
        connection = self._connect()
        try:
            cursor = connection.execute("UPDATE night_lock SET renewed = ? WHERE lock = 'night' AND holder = ?",
                                        ((now or datetime.now(UTC)).isoformat(), _stored(me)))
            return cursor.rowcount == 1
        finally:
            connection.close()

    def release(self, me: Holder) -> None:
        connection = self._connect()
        try:
            connection.execute("DELETE FROM night_lock WHERE lock = 'night' AND holder = ?", (_stored(me),))
        finally:
            connection.close()

    def holder(self) -> Holder | None:
        connection = self._connect()
        try:
            row = connection.execute("SELECT holder FROM night_lock WHERE lock = 'night'").fetchone()
        finally:
            connection.close()
        return _holder(row[0]) if row else None


def alive(holder: Holder, renewed: datetime, now: datetime) -> bool:
    """A holder on this machine is alive while its process is; one elsewhere while it renews its lease."""
    if holder.process.here:
        return holder.process.alive()
    return now - renewed < LEASE


def _stored(holder: Holder) -> str:
    value = asdict(holder)
    value["since"] = holder.since.isoformat()
    return json.dumps(value, sort_keys=True)


def _holder(stored: str) -> Holder:
    value = json.loads(stored)
    return Holder(run=value["run"], what=value["what"], process=RunProcess(**value["process"]),
                  since=datetime.fromisoformat(value["since"]), flow_run_id=value.get("flow_run_id"))
