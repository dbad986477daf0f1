"""`prefect server start` on a free loopback port with a home of its own: the server the estate demo, the soak and
the tests that need Prefect's real services (its scheduler, its UI) run against, started as an operator starts it."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import ClassVar

import httpx

from emulator.testing import free_port

DATABASE = "prefect.db"  # where `prefect server start` keeps its SQLite database, in its PREFECT_HOME
# How long a client of the server waits for an answer before it sends the request again (Prefect's default: 60 s).
# On a busy machine `prefect server start` has taken 62 s to answer while its SQLite database was locked, after
# doing what was asked: `prefect deployment run` then created the fan-out's flow run twice.
CLIENT_REQUEST_TIMEOUT = 300
# Started on a copy of a database whose block types a server registered, a server need not register them again:
# 0.7 of the 3.4 s of CPU a start takes on a quiet machine (measured with and without)
BLOCK_TYPES_REGISTERED = {"PREFECT_API_BLOCKS_REGISTER_ON_START": "false"}


def command_path(name: str) -> str:
    """`prefect` and `fleet` from this interpreter's environment."""
    return str(Path(sys.executable).with_name(name))


def stop_process_group(process: subprocess.Popen[bytes], signal_number: int, timeout: float) -> None:
    """Signal a process started in a session of its own and everything it started; killed if still up after
    `timeout` seconds."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal_number)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def clean_environment(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without its PREFECT_* settings (a test harness's API URL among them), a Prefect
    home of its own and telemetry off; `extra` on top."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    return env | {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"} | extra


class LocalPrefectServer:
    """`with LocalPrefectServer(home) as server: server.api_url`; the server stops (its whole process group) when
    the block ends. `settings` are PREFECT_* variables for the server (a short scheduler loop, say).

    The first server a process starts copies its new database as it stands once healthy (migrated, block types
    registered, nothing else yet); the next ones start from that copy, and register no block types: Prefect's
    migrations of an empty database cost about 4 of the 9 s of CPU a start takes on 2 cores."""

    _blank_database: ClassVar[Path | None] = None
    # PREFECT_* settings every server of this process starts with, under its own `settings` (the test suite turns
    # off a service none of its readers needs)
    base_settings: ClassVar[dict[str, str]] = {}

    def __init__(self, home: Path, settings: dict[str, str] | None = None, startup_timeout: float = 180) -> None:
        self.home = home.resolve()
        self.settings = settings or {}
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.url}/api"
        self.log = self.home / "server.log"
        self.argv = [command_path("prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(self.port)]
        self._process: subprocess.Popen[bytes] | None = None

    def environment(self, **extra: str) -> dict[str, str]:
        """The environment a client of this server runs in: its API URL, the server's home, a request timeout
        longer than the server's slowest answers."""
        return clean_environment(self.home, PREFECT_API_URL=self.api_url,
                                 PREFECT_API_REQUEST_TIMEOUT=str(CLIENT_REQUEST_TIMEOUT), **extra)

    def start(self) -> LocalPrefectServer:
        self.home.mkdir(parents=True, exist_ok=True)
        database = self.home / DATABASE
        blank = LocalPrefectServer._blank_database
        copied = blank is not None and blank.is_file() and not database.exists()
        if copied:
            shutil.copyfile(blank, database)
        settings = {**self.base_settings, **(BLOCK_TYPES_REGISTERED if copied else {}), **self.settings}
        env = clean_environment(self.home, PREFECT_UI_API_URL=self.api_url, **settings)
        with self.log.open("wb") as log:  # the process keeps its own handle
            self._process = subprocess.Popen(self.argv, env=env, stdout=log,  # noqa: S603 - our own command
                                             stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_until_healthy()
        if blank is None:
            LocalPrefectServer._blank_database = self._copy_database()
        return self

    def _copy_database(self) -> Path | None:
        """A consistent copy of the running server's database (SQLite's online backup), beside the process's
        other temporary files; None when there is none to copy."""
        database = self.home / DATABASE
        if not database.is_file():
            return None
        folder = tempfile.mkdtemp(prefix="prefect-blank-")
        atexit.register(shutil.rmtree, folder, True)
        copy = Path(folder) / DATABASE
        with contextlib.closing(sqlite3.connect(database)) as source, contextlib.closing(sqlite3.connect(copy)) as to:
            source.backup(to)
        return copy

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            stop_process_group(process, signal.SIGTERM, timeout=30)

    def __enter__(self) -> LocalPrefectServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _wait_until_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=2) as http:  # one client for every poll: each new one loads the CA bundle
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise RuntimeError(f"prefect server start exited {self._process.returncode}; see {self.log}")
                try:
                    if http.get(f"{self.api_url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
        raise RuntimeError(f"the Prefect server did not answer within {self.startup_timeout:g} s; see {self.log}")
