"""The night over many dashboards on one machine, started the documented way (README, "Scaling out with work
pools"): a Prefect server, a process work pool, emulated dashboards saved as blocks, the deployments, workers
started with `prefect worker start`, and `prefect deployment run` of the fan-out.

Every Prefect and fleet step is the command an operator types, run as a subprocess (`commands` keeps them); only
the emulated dashboards run in this process, as an operator's real dashboards run elsewhere.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx
from rich.console import Console

from cli.demo import dashboard_environment
from cli.local_prefect import LocalPrefectServer, command_path
from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.engine.estate import ESTATE_FILE, Estate, find_run_dir
from fleet.model.vocabulary import count

POOL = "fleet-maintenance"
FAN_OUT = "maintain-dashboards/maintain-dashboards"
REPOSITORY = Path(__file__).resolve().parent.parent
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
_UUID = re.compile(r"UUID: ([0-9a-f-]{36})")


@dataclass
class EstateRun:
    """What one `prefect deployment run` of the fan-out left: its flow run, its final state, the combined result."""

    flow_run_id: str
    state: str  # the Prefect state type: COMPLETED, or FAILED when a dashboard's night did not complete
    output: str
    estate: Estate
    directory: Path

    @property
    def report(self) -> Path:
        return self.directory / "estate.html"


@dataclass
class LocalEstate:
    """`with LocalEstate(output) as estate: estate.run_night()`; everything stops when the block ends."""

    output: Path
    dashboards: int = 3
    workers: int = 2
    sites: int = 12
    faults: str = "realistic"
    time_scale: float = 0.002
    source: Path = REPOSITORY
    commands: list[list[str]] = field(default_factory=list)
    emulators: dict[str, EmulatorServer] = field(default_factory=dict)
    api_url: str = ""
    _server: LocalPrefectServer | None = field(default=None, repr=False)
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)
    _env: dict[str, str] = field(default_factory=dict, repr=False)  # the environment: never in a repr

    @property
    def report_dir(self) -> Path:
        return self.output / "reports"

    @property
    def logs(self) -> Path:
        return self.output / "logs"

    def __enter__(self) -> LocalEstate:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        self.output = self.output.resolve()
        self.logs.mkdir(parents=True, exist_ok=True)
        self._server = LocalPrefectServer(self.output / ".prefect")
        self.commands.append(self._server.argv)
        self._server.start()
        self.api_url = self._server.api_url
        self._env = {
            **self._server.environment(),
            "PREFECT_WORKER_QUERY_SECONDS": "2",  # a worker asks for work every 2 s (default 10)
            # every dashboard's night on the emulators' clock, as `fleet demo` runs its one night: paced, waiting
            # and sizing its calls in the emulated dashboard's seconds, not a real dashboard's
            "FLEET_TIME_SCALE": str(self.time_scale),
            "FLEET_REPORT_DIR": str(self.report_dir),
            "FLEET_SMTP_HOST": "",  # messages are written as .eml files beside each report
            "FLEET_REPORT_TO": os.environ.get("FLEET_REPORT_TO") or "operator@example.com",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(self.source), os.environ.get("PYTHONPATH")])),
        }
        self._run([command_path("prefect"), "work-pool", "create", POOL, "--type", "process", "--overwrite"])
        for number in range(1, self.dashboards + 1):
            block = f"dashboard-{number}"
            config = EmulatorConfig(sites=self.sites + 4 * (number - 1), seed=number, faults=self.faults,
                                    time_scale=self.time_scale)
            self.emulators[block] = server = EmulatorServer(config).start()
            dashboard = dashboard_environment(server.credentials)
            dashboard.pop("FLEET_PROBE_URL_TEMPLATE")  # given to that dashboard's night only (`environment`)
            self._run([command_path("fleet"), "blocks", "save", "--dashboard", block, "--overwrite"], dashboard)
        self._run([command_path("fleet"), "deploy", "--pool", POOL, "--source", str(self.source)])
        for number in range(1, self.workers + 1):
            self._spawn(f"worker-{number}", [command_path("prefect"), "worker", "start", "--pool", POOL, "--type",
                                             "process", "--name", f"fleet-worker-{number}"])

    def run_night(self, timeout: float = 600) -> EstateRun:
        """`prefect deployment run` of the fan-out, watched to its end; the combined result it wrote."""
        environment = {
            block: {"FLEET_PROBE_URL_TEMPLATE": server.credentials["site_url_template"]}
            for block, server in self.emulators.items()
            if server.app is not None
        }
        flow_run_id, state, done = self.run_deployment(FAN_OUT, {"environment": environment}, timeout)
        directory = find_run_dir(self.report_dir / "estate", flow_run_id, marker=ESTATE_FILE)
        if directory is None:
            raise RuntimeError(f"the fan-out {flow_run_id} ended {state} and wrote no {ESTATE_FILE}:\n"
                               f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\nlogs: {self.logs}")
        return EstateRun(flow_run_id, state, done.stdout, Estate.read(directory), directory)

    def run_deployment(self, deployment: str, parameters: dict[str, object],
                       timeout: float = 600) -> tuple[str, str, subprocess.CompletedProcess[str]]:
        """`prefect deployment run` watched to its end: the flow run's id, its final state type, the command."""
        done = self._run([command_path("prefect"), "deployment", "run", deployment, "--params", json.dumps(parameters),
                          "--watch", "--watch-interval", "2", "--watch-timeout", str(int(timeout))], check=False,
                         timeout=timeout + 60)
        found = _UUID.search(done.stdout)
        if not found:
            raise RuntimeError(f"prefect deployment run printed no flow run id:\n{done.stdout}\n{done.stderr}")
        flow_run_id = found.group(1)
        return flow_run_id, self._final_state(flow_run_id, timeout), done  # `--watch` may stop early

    def stop(self) -> None:
        """Workers first (each started in its own process group), then the server, then the dashboards."""
        for process in reversed(self._processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self._processes):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self._processes.clear()
        if self._server is not None:
            self._server.stop()
        for server in self.emulators.values():
            if server.app is not None:
                server.stop()

    def _run(self, argv: list[str], extra: dict[str, str] | None = None, *, check: bool = True,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
        self.commands.append(argv)
        done = subprocess.run(argv, env={**self._env, **(extra or {}), "COLUMNS": "200"},  # noqa: S603 - our commands
                              capture_output=True, text=True, timeout=timeout, cwd=self.source)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:4])} exited {done.returncode}:\n{done.stdout[-2000:]}\n"
                               f"{done.stderr[-2000:]}")
        return done

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.commands.append(argv)
        with (self.logs / f"{name}.log").open("wb") as log:  # the process keeps its own handle
            self._processes.append(subprocess.Popen(argv, env=self._env, stdout=log,  # noqa: S603 - our commands
                                                    stderr=subprocess.STDOUT, cwd=self.source, start_new_session=True))

    def _final_state(self, flow_run_id: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            state = (httpx.get(f"{self.api_url}/flow_runs/{flow_run_id}", timeout=30).json().get("state") or {})
            if state.get("type") in TERMINAL or time.monotonic() > deadline:
                return str(state.get("type"))
            time.sleep(1)



def run_estate_demo(output: Path, *, dashboards: int, workers: int, sites: int, faults: str, time_scale: float,
                    nights: int, console: Console) -> list[EstateRun]:
    """`fleet demo --dashboards N --workers W`: bring everything up, run the fan-out `nights` times, say where
    the combined reports are, and stop it all."""
    console.print(f"Starting a Prefect server, the work pool {POOL!r}, {count(workers, 'worker')} and "
                  f"{count(dashboards, 'emulated dashboard')} ({sites}+ sites each, faults: {faults}) under "
                  f"{output.resolve()} ...", soft_wrap=True)
    runs = []
    with LocalEstate(output, dashboards=dashboards, workers=workers, sites=sites, faults=faults,
                     time_scale=time_scale) as estate:
        console.print(f"Prefect server: {estate.api_url.removesuffix('/api')} (logs: {estate.logs})", soft_wrap=True)
        for _ in range(nights):
            run = estate.run_night()
            runs.append(run)
            totals = run.estate.totals
            console.print(f"\n[bold]maintain-dashboards {run.flow_run_id}[/bold]: {totals.sites} sites, "
                          f"{totals.updated} updated, {totals.failed} failed", soft_wrap=True)
            for night in run.estate.nights:
                console.print(f"  {night.block}: {night.status.value}"
                              + (f" ({night.flow_run_name})" if night.flow_run_name else "")
                              + (f": {night.message}" if night.message else ""), soft_wrap=True, highlight=False)
    console.print(f"\nOpen the combined report: file://{runs[-1].report}", soft_wrap=True, highlight=False)
    return runs
