"""The README's "Going live" chapter stays true: its rehearsal on the emulator runs as printed from a fresh home,
every variable of its `.env` is one the settings read, and its systemd unit starts `fleet serve` with a home of its
own."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest

from dashboard.home import FleetSettings, variable_for
from dashboard.settings import DashboardSettings
from deployments.serve import ScheduleSettings
from fleet.model.settings import PipelineSettings
from reporting.settings import MailSettings

README = Path(__file__).resolve().parents[2] / "README.md"


def chapter() -> str:
    return README.read_text().split("## Going live", 1)[1].split("\n## ", 1)[0]


def test_every_variable_of_the_go_live_env_file_is_read() -> None:
    heredoc = re.search(r"cat > \.env <<'?ENV'?\n(.*?)\n\s*ENV\n", chapter(), re.S)
    assert heredoc, "the chapter writes the home's .env"
    written = [line.strip().split("=", 1)[0] for line in heredoc.group(1).splitlines() if line.strip()]
    classes: list[type[FleetSettings]] = [DashboardSettings, PipelineSettings, MailSettings, ScheduleSettings]
    known = {variable_for(field) for cls in classes for field in cls.model_fields} | {"FLEET_HOME"}
    assert written and set(written) <= known, set(written) - known


def test_the_systemd_unit_serves_from_its_own_home() -> None:
    unit = re.search(r"```ini\n(.*?)```", chapter(), re.S)
    assert unit
    lines = [line.strip() for line in unit.group(1).splitlines()]
    assert any(line.startswith("Environment=FLEET_HOME=/") for line in lines)
    assert any(line.startswith("Environment=PREFECT_API_URL=") for line in lines)
    [start] = [line for line in lines if line.startswith("ExecStart=")]
    assert start.endswith("/fleet serve")


@pytest.mark.long(35)
def test_the_rehearsal_on_the_emulator_runs_as_printed(tmp_path: Path) -> None:
    """The block under "Rehearse on the emulator", run by bash from the clone's root as a new user would, in a home
    of their own with no FLEET_* or PREFECT_* setting: every command succeeds, the canary night ran on the canaries
    and wrote its summary and reports in the home the block names."""
    step = chapter().split("**Rehearse on the emulator**", 1)[1]
    block = textwrap.dedent(re.search(r"```bash\n(.*?)```", step, re.S).group(1))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("FLEET_", "PREFECT_", "VIRTUAL_ENV"))}
    env |= {"HOME": str(tmp_path), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    script = tmp_path / "rehearsal.sh"
    script.write_text("set -euo pipefail\n" + block)
    process = subprocess.Popen(["bash", str(script)], cwd=README.parent, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # the emulator, if a command failed before `kill %1`
    assert process.returncode == 0, output[-4000:]
    assert "sites tagged canary: " in output and "Traceback" not in output, output[-4000:]
    home = tmp_path / "fleet-rehearsal"
    summaries = sorted((home / "reports").glob("*/summary.json"))
    assert len(summaries) == 2, output[-4000:]  # the dry run's and the canary night's
    from fleet.model.summary import Summary

    dry, canary = (Summary.read(path) for path in summaries)
    assert dry.dry_run and not canary.dry_run
    assert canary.selection.tags == ["canary"] and len(canary.sites) == 2, output[-4000:]
    assert any(line.startswith(canary.run_id) for line in output.splitlines()), output[-4000:]  # `fleet runs`
    # the rehearsal covers security: the emulator's feed was read, a fix went first, the rest waited
    from fleet.model.summary import Outcome
    from fleet.model.vulnerability import VulnerabilityClass

    assert canary.vulnerability_feed is not None and canary.vulnerability_feed.fetched_at, output[-4000:]
    fixes = [item for item in canary.items if item.security and item.security.security is VulnerabilityClass.fixes]
    assert fixes and {item.outcome for item in fixes} == {Outcome.updated}, [(i.slug, i.outcome) for i in fixes]
    routine = [item for item in canary.items if item.outcome is Outcome.delayed]
    assert routine and not any(item.security and item.security.security is VulnerabilityClass.fixes for item in routine)
    assert "fix installed" in output, output[-4000:]  # `fleet vulnerabilities`
