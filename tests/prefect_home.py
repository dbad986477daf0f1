"""The Prefect home a test process (or a benchmark's share) runs under: its own, and lean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import certifi


def own_prefect_home(name: str) -> Path:
    """A Prefect home for this process alone, and none of the caller's PREFECT_* settings: workers never share a
    Prefect database (a temporary server a subprocess night starts keeps its SQLite file in the home), and no test
    reads or writes the user's ~/.prefect or reaches the server an exported PREFECT_API_URL names. The test
    processes and `bench/invariants.py`'s shares each make one (`name` names it)."""
    for setting in [setting for setting in os.environ if setting.startswith("PREFECT_")]:
        del os.environ[setting]
    home = Path(tempfile.mkdtemp(prefix=f"prefect-home-{name}-"))
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    # The harness and the temporary servers evaluate no automations and keep no events: no test asks them for
    # either (the automations are tested on `prefect server start` servers of their own, whose environment drops
    # these), and they cost about 10% of those servers' CPU.
    os.environ["PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED"] = "false"
    os.environ["PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED"] = "false"
    # Nor do they write task runs' states into their databases (Prefect's task run recorder, fed by every task
    # run's events: a quarter of those servers' CPU). Task runs still run and report as they do everywhere: the
    # states travel as events, which a background task's waiter reads; the flow runs are kept as before.
    os.environ["PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED"] = "false"
    # The in-process nights' log records are not sent to the test servers: no test reads them there (those that
    # read a run's logs run it in a process of its own, against a server of their own), and shipping them cost
    # about 6% of the suite's CPU on 2 cores.
    os.environ["PREFECT_LOGGING_TO_API_ENABLED"] = "false"
    # Nor do they run the services that act on runs no test leaves to them: the scheduler (the tests that schedule
    # serve on `prefect server start` servers of their own), late runs, the work pools' foreman, the cleanup of
    # cancelled runs, the expiry of pauses (the approval gate times out in the flow) and the repossessor of
    # concurrency slots: a quarter of an idle server's CPU (0.87 against 0.62 CPU-s a minute, measured side by side).
    for service in ("SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS", "REPOSSESSOR"):
        os.environ[f"PREFECT_SERVER_SERVICES_{service}_ENABLED"] = "false"
    # A night run in a subprocess without the harness starts a temporary Prefect server: under a full suite's
    # load it needs more than Prefect's 20 s.
    os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
    # Every Prefect API client loads the CA bundle it verifies the API's certificate with (certifi's, 140 roots:
    # 13 ms of CPU) although the test servers speak plain HTTP, and Prefect makes a client per call in many places:
    # about 5% of the test processes' CPU. A bundle of one root costs nothing and verifies just the same.
    os.environ["PREFECT_API_SSL_CERT_FILE"] = str(_one_root(home))
    return home


def _one_root(home: Path) -> Path:
    """The first root certificate of certifi's bundle, alone in a file of the Prefect home."""
    bundle = Path(certifi.where()).read_text()
    end = "-----END CERTIFICATE-----"
    first = bundle[bundle.index("-----BEGIN CERTIFICATE-----"): bundle.index(end) + len(end)] + "\n"
    (path := home / "one-root.pem").write_text(first)
    return path



BLANK = "prefect-blank.db"


def migrated_blank_database(folder: Path) -> Path:
    """An empty Prefect database with every migration applied and Prefect's block types registered, made once in
    `folder` for the whole run: each of the suite's Prefect databases (a worker's harness, its home's temporary
    servers, each `prefect server start`) starts as a copy of it instead of migrating an empty file (Prefect's ~150
    migrations: about 3.5 s of CPU each time, some 15 times a run), and its server does not register the block
    types again (`BLOCK_TYPES_REGISTERED` in cli/local_prefect.py). Made in a process of its own, so that the test
    processes never import the server."""
    blank = folder / BLANK
    if blank.is_file():
        return blank
    scratch = Path(tempfile.mkdtemp(prefix="prefect-blank-", dir=folder))
    making = scratch / BLANK
    code = ("import asyncio\nimport prefect.plugins\nfrom prefect.server.database import provide_database_interface\n"
            "from prefect.server.models.block_registration import run_block_auto_registration\n"
            "async def make():\n"
            "    db = provide_database_interface()\n"
            "    await db.create_db()\n"
            "    prefect.plugins.load_prefect_collections()  # as the server does before registering\n"
            "    async with await db.session() as session:\n"
            "        await run_block_auto_registration(session=session)\n"
            "asyncio.run(make())\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    env |= {"PREFECT_HOME": str(scratch), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{making}"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    making.replace(blank)  # whole or not at all
    shutil.rmtree(scratch, ignore_errors=True)
    return blank


def start_from(blank: Path, database: Path) -> None:
    """`database` begins as a copy of the migrated blank one (left alone if it exists)."""
    database.parent.mkdir(parents=True, exist_ok=True)
    if not database.exists():
        shutil.copyfile(blank, database)
