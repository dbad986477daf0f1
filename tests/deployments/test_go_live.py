"""The README's "Going live" chapter stays true: every variable of its `.env` is one the settings read, and its
systemd unit starts `fleet serve` with a home of its own."""

from __future__ import annotations

import re
from pathlib import Path

from dashboard.home import FleetSettings, variable_for
from dashboard.settings import DashboardSettings
from deployments.serve import ScheduleSettings
from fleet.model.settings import PipelineSettings
from reporting.settings import MailSettings

README = Path(__file__).resolve().parents[2] / "README.md"


def chapter() -> str:
    return README.read_text().split("## Going live", 1)[1].split("\n## ", 1)[0]


def test_every_variable_of_the_go_live_env_file_is_read() -> None:
    heredoc = re.search(r"cat > \.env <<'ENV'\n(.*?)\n\s*ENV\n", chapter(), re.S)
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
