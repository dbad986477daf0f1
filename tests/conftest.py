"""Shared fixtures, and what makes every test isolated by default: each test process (one per xdist worker) has a
Prefect home of its own, set before anything imports Prefect; each test has its own FLEET_HOME and working
directory, and sees none of the FLEET_* or PREFECT_* settings of the shell that started the suite. The Prefect
harness is session-scoped (one test server per worker) and started only by tests that ask for it."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.local_http import LOCAL_HTTP
from tests.prefect_home import migrated_blank_database, own_prefect_home, start_from
from tests.rewritten_modules import modules_pytest_rewrites, rewrite_test_modules
from tests.tls import Certificate, self_signed

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "deployments", "flows", "tasks", "orchestration", "reporting", "fleet", "dashboard", "emulator")


PREFECT_HOME = own_prefect_home(os.environ.get("PYTEST_XDIST_WORKER", "main"))
BLANK_DATABASE = "TESTS_PREFECT_BLANK_DATABASE"  # the run's migrated blank database, for the workers too
HARNESS_SERVERS: set[str] = set()  # the API of this process's test server, once started


def pytest_configure(config: pytest.Config) -> None:
    # Hypothesis keeps its examples (the failing ones, to replay) in the checkout, whatever a test's directory
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(ROOT / ".hypothesis")
    # Every Prefect database of the run starts migrated: the first process makes the blank one before xdist starts
    # its workers (they inherit its environment), each process's home and `prefect server start` copy it.
    # Meanwhile, in a side-by-side run, it writes the test modules' rewritten pycs for the workers
    # (tests/rewritten_modules.py), on the other core: the database is made in a process of its own.
    if BLANK_DATABASE not in os.environ:
        folder = Path(tempfile.mkdtemp(prefix="prefect-blank-run-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        with ThreadPoolExecutor(1) as beside:
            making = beside.submit(migrated_blank_database, folder)
            if config.getoption("numprocesses", None):
                rewrite_test_modules(config, modules_pytest_rewrites(ROOT / "tests", config))
            os.environ[BLANK_DATABASE] = str(making.result())
    blank = Path(os.environ[BLANK_DATABASE])
    start_from(blank, PREFECT_HOME / "prefect.db")  # the temporary servers of this process's subprocess nights
    from cli.local_prefect import BLOCK_TYPES_REGISTERED, LocalPrefectServer

    os.environ.update(BLOCK_TYPES_REGISTERED)  # this process's harness and temporary servers start from the blank
    LocalPrefectServer._blank_database = blank
    # Nor do the `prefect server start` servers write task runs' states into their databases (no test reads a task
    # run from the API): the task run recorder was a quarter of the in-process servers' CPU (tests/prefect_home.py).
    LocalPrefectServer.base_settings = {"PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false"}


@pytest.hookimpl(trylast=True)  # after the random order (pytest-randomly) and pytest's grouping by fixture
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Side by side, the tests marked `long` lead the workers' shares, so that none starts last and holds up the
    end of the run. xdist's worksteal hands each of the N workers one contiguous share of this order (the items
    split evenly) and steals only from a share's end. A module's long tests stay together (they share its
    servers); the modules go to the least loaded share, the heaviest first, by `long(seconds)`."""
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:
        items[:] = long_first(items, workers)


def long_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """`items` in the order that gives each of `workers` shares its long tests first (every item once)."""
    long = [item for item in items if item.get_closest_marker("long")]
    if not long:
        return items
    units: dict[str, list[pytest.Item]] = {}
    for item in long:
        units.setdefault(str(item.path), []).append(item)
    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for unit in sorted(units.values(), key=lambda unit: -sum(map(_expected_seconds, unit))):
        share = loads.index(min(loads))
        heads[share] += unit
        loads[share] += sum(map(_expected_seconds, unit))
    rest = iter([item for item in items if not item.get_closest_marker("long")])
    ordered: list[pytest.Item] = []
    remaining = len(items)
    for share in range(workers):
        size = remaining // (workers - share)
        remaining -= size
        ordered += heads[share] + list(itertools.islice(rest, max(size - len(heads[share]), 0)))
    ordered += list(rest)  # more long tests than a share holds: the order still has every item once
    assert sorted(map(id, ordered)) == sorted(map(id, items))
    return ordered


def _expected_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("long")
    return float(marker.args[0]) if marker and marker.args else 30.0


def drop_unsent_prefect_items() -> None:
    """Forget the logs and events Prefect's shipping services still queue for servers the tests have stopped: drained
    one by one against a server that is gone, 1,400 of them held a test process past its last test for over half an
    hour. No test reads them any more."""
    from prefect._internal.concurrency.services import _QueueServiceBase

    for service in tuple(_QueueServiceBase._instances.values()):
        pending = service._queue
        with pending.mutex:
            dropped = len(pending.queue)
            pending.queue.clear()
            pending.unfinished_tasks = max(pending.unfinished_tasks - dropped, 0)
            if not pending.unfinished_tasks:  # `wait_until_empty` (Queue.join) returns
                pending.all_tasks_done.notify_all()


def pytest_unconfigure(config: pytest.Config) -> None:
    drop_unsent_prefect_items()
    shutil.rmtree(PREFECT_HOME, ignore_errors=True)


@pytest.fixture(autouse=True)
def fleet_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every test has a home of its own (state database, reports, `.env`) and starts in an empty directory of its
    own: none reads or writes the user's state directory, a `.env` or `reports/` in the checkout, or a FLEET_*
    variable of the shell that started the suite."""
    for name in [name for name in os.environ if name.startswith("FLEET_") and name != "FLEET_REFERENCE_DIR"]:
        monkeypatch.delenv(name)
    home = tmp_path / "fleet-home"
    monkeypatch.setenv("FLEET_HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return home


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    """A self-signed certificate for 127.0.0.1, used as its own CA by a client told to trust it."""
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One Prefect test server per test process (about 9 s to start), its database in a temporary directory: a
    copy of the run's migrated blank one, put where the harness makes its database (`prefect-test.db` in the
    directory it asks `mkdtemp` for), so that it migrates nothing."""
    from unittest import mock

    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_DATABASE_CONNECTION_URL
    from prefect.testing.utilities import prefect_test_harness

    made: list[Path] = []

    def seeded(*args: object, **kwargs: object) -> str:
        folder = tempfile.mkdtemp()
        made.append(Path(folder) / "prefect-test.db")
        start_from(Path(os.environ[BLANK_DATABASE]), made[-1])
        return folder

    with mock.patch("prefect.testing.utilities.mkdtemp", seeded), prefect_test_harness(server_startup_timeout=120):
        assert made and str(made[-1]) in PREFECT_SERVER_DATABASE_CONNECTION_URL.value(), "the harness's database moved"
        HARNESS_SERVERS.add(PREFECT_API_URL.value())
        yield
        drop_unsent_prefect_items()


@pytest.fixture(autouse=True)
def no_temporary_prefect_server() -> Iterator[None]:
    """A test that runs a flow (or calls Prefect's API) in its process without the `prefect_harness` fixture made
    Prefect start a temporary server there, which then lived, idle and costing CPU, until the process ended: its
    test fails saying so, and the server is stopped."""
    yield
    started = sys.modules.get("prefect.server.api.server")
    if started is None:
        return
    strays = [server for server in list(started.SubprocessASGIServer._instances.values())
              if server.running and server.api_url not in HARNESS_SERVERS]
    for server in strays:
        server.stop()
    if strays:
        pytest.fail("this test started a temporary Prefect server in the test process: ask for the `prefect_harness` "
                    "fixture (one server per test process)")


@pytest.fixture(autouse=True)
def no_lock_left_behind() -> Iterator[None]:
    """A test process's Prefect servers (its harness, or the temporary server Prefect starts for the first flow
    run without one) are shared by its tests. A write budget a test left taken (`FLEET_CONCURRENCY_LIMIT`, a night
    killed with SIGKILL or a test that timed out mid-night) would make every later night there wait out its lease,
    or for ever on a temporary server, which reclaims no lease: each test ends with the global concurrency limits
    of those servers deleted, and Prefect's slot services stopped: each keeps the API client of the server that was
    current when it started (a temporary server, before the harness), and would ask that one for the next test's
    limits. (The dashboards' night locks are not Prefect's: they live in each test's own home.)"""
    yield
    if "prefect.concurrency.services" in sys.modules:
        from prefect._internal.concurrency.services import _QueueServiceBase

        for service in tuple(_QueueServiceBase._instances.values()):
            if type(service).__module__.startswith("prefect.concurrency"):
                service._stop()
    started = sys.modules.get("prefect.server.api.server")
    if started is None:
        return
    for server in list(started.SubprocessASGIServer._instances.values()):
        if server.running:
            found = LOCAL_HTTP.post(f"{server.api_url}/v2/concurrency_limits/filter", json={})
            for limit in found.json() if found.is_success else []:
                LOCAL_HTTP.delete(f"{server.api_url}/v2/concurrency_limits/{limit['name']}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    from tests.reference import REPLAY_COUNTS

    if REPLAY_COUNTS:
        terminalreporter.section("replays of the real dashboard's exchanges")
        for line in REPLAY_COUNTS:
            terminalreporter.write_line(line)
    _coverage_by_package(terminalreporter, config)


def _coverage_by_package(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Line and branch coverage of each package, and its three least covered modules (pytest-cov measures; its
    own report is off: one line per module is too long to read)."""
    plugin = config.pluginmanager.getplugin("_cov")
    controller = getattr(plugin, "cov_controller", None)
    if controller is None or getattr(controller, "cov", None) is None or hasattr(config, "workerinput"):
        return
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "coverage.json"
        try:
            controller.cov.json_report(outfile=str(report))
        except Exception as error:  # noqa: BLE001 - no data (say, a run of one test outside the packages)
            terminalreporter.write_line(f"coverage: no report ({error})")
            return
        files = json.loads(report.read_text())["files"]
    terminalreporter.section("coverage by package (lines, branches)")
    for package in PACKAGES:
        modules = {name: entry["summary"] for name, entry in files.items() if name.split(os.sep)[0] == package}
        if not modules:
            continue
        lines = [sum(s[key] for s in modules.values()) for key in ("covered_lines", "num_statements")]
        branches = [sum(s[key] for s in modules.values()) for key in ("covered_branches", "num_branches")]
        least = sorted(modules.items(), key=lambda item: item[1]["percent_covered"])[:3]
        terminalreporter.write_line(
            f"{package:<12} lines {_percent(*lines)} ({lines[0]}/{lines[1]})  "
            f"branches {_percent(*branches)} ({branches[0]}/{branches[1]})  least: "
            + ", ".join(f"{name.split(os.sep, 1)[1]} {summary['percent_covered']:.0f}%" for name, summary in least)
        )


def _percent(covered: int, total: int) -> str:
    return f"{100 * covered / total:5.1f}%" if total else "  n/a "
