"""The demo: the nightly flow against an embedded emulator, ending in rendered reports and `.eml` messages."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer
from fleet.model.settings import STATE_FILE
from fleet.model.summary import SUMMARY_FILE, Summary
from fleet.model.vocabulary import count
from fleet.state.dashboard_memory import FOLDER as MEMORY_FOLDER


def dashboard_environment(credentials: Mapping[str, Any]) -> dict[str, str]:
    """The `FLEET_*` variables that point the pipeline (and its home-page probe) at an emulator."""
    return {
        "FLEET_BASE_URL": credentials["base_url"],
        "FLEET_NAMESPACE": credentials["namespace"],
        "FLEET_API_KEY": credentials["api_keys"]["read_write"],
        "FLEET_ABILITIES_USER": credentials["application_password"]["username"],
        "FLEET_ABILITIES_PASSWORD": credentials["application_password"]["password"],
        "FLEET_PROBE_URL_TEMPLATE": credentials["site_url_template"],
    }


def feed_environment(credentials: Mapping[str, Any]) -> dict[str, str]:
    """The `FLEET_VULN_*` variables that read the emulator's vulnerability feed about its own fleet (its admin token
    stands in for the Wordfence key): the demo's reports show the known vulnerabilities, the security lane and what
    stays exposed."""
    return {"FLEET_VULN_FEED": credentials["vulnerability_feed"], "FLEET_VULN_FEED_KEY": credentials["admin_token"]}


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore what was there."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def fresh_start(output_dir: Path) -> list[str]:
    """Forget what earlier demos left in `output_dir` (their state database and their dashboard's memory: holds,
    first-seen dates, the journal; their run directories and alerts), so that every demo's first night is the
    same; returns what was removed."""
    removed = []
    state = output_dir / STATE_FILE
    if state.exists():
        removed.append(f"the state database {state}")
    for path in (state, state.with_name(STATE_FILE + "-wal"), state.with_name(STATE_FILE + "-shm")):
        path.unlink(missing_ok=True)
    memories = output_dir / MEMORY_FOLDER
    if memories.is_dir():
        removed.append(f"the dashboards' memory {memories}")
        shutil.rmtree(memories)
    runs = [path for path in output_dir.glob(f"*/{SUMMARY_FILE}")] if output_dir.is_dir() else []
    for summary in runs:
        shutil.rmtree(summary.parent)
    if runs:
        removed.append(count(len(runs), "run directory", "run directories"))
    if (output_dir / "alerts").is_dir():
        shutil.rmtree(output_dir / "alerts")
        removed.append("the alerts")
    return removed


@dataclass
class DemoResult:
    run_dir: Path
    summary: Summary
    files: list[Path] = field(default_factory=list)
    gateway_timeouts: int = 0  # the emulated gateway's 504s to this night's own calls (the ground truth)


def run_demo(
    output_dir: Path,
    *,
    sites: int = 40,
    seed: int = 0,
    faults: str = "realistic",
    time_scale: float = 0.002,
    nights: int = 1,
) -> list[DemoResult]:
    """Start an emulator on a free loopback port, run `nightly_maintenance` against it `nights` times (the same
    fleet, so later reports show trends), and return what each night wrote. The demo's home is `output_dir`: its
    memory never mixes with an operator's (FLEET_HOME)."""
    from fleet.rules.breakage import NightFailure
    from flows.nightly import nightly_maintenance

    config = EmulatorConfig(sites=sites, seed=seed, faults=faults, time_scale=time_scale)
    output_dir = output_dir.resolve()
    # The demo never sends mail: the messages are written as .eml files beside the summary.
    mail = {"FLEET_SMTP_HOST": "", "FLEET_REPORT_TO": os.environ.get("FLEET_REPORT_TO") or "operator@example.com"}
    results = []
    scaled = {"FLEET_TIME_SCALE": str(config.time_scale)}  # the night on the emulator's clock
    home = {"FLEET_HOME": str(output_dir), "FLEET_STATE_DB": str(output_dir / STATE_FILE)}
    with EmulatorServer(config) as server, environment({**dashboard_environment(server.credentials), **scaled,
                                                        **mail, **home, **feed_environment(server.credentials)}):
        for _ in range(nights):
            timeouts_before = server.emulator.capacity.gateway_timeouts
            try:
                summary_path = Path(asyncio.run(nightly_maintenance(report_dir=str(output_dir))))
            except NightFailure as ended:  # the realistic faults break sites:
                summary_path = Path(ended.summary_path)  # the reports lead with them
            run_dir = summary_path.parent
            files = sorted(path for path in run_dir.rglob("*") if path.is_file())
            results.append(DemoResult(run_dir=run_dir, summary=Summary.read(run_dir), files=files,
                                      gateway_timeouts=server.emulator.capacity.gateway_timeouts - timeouts_before))
    return results
