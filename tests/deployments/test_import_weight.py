"""What a `fleet` process loads before it does anything: the CLI, `fleet serve` (which only registers the flows)
and the night's flow leave out the report's libraries (pandas, matplotlib) and the browser's (Playwright), which
load when a report is made or a page shot. Each of these processes paid about 2 s of CPU for them, a mistake's
one line included."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pandas", "matplotlib", "playwright")


@pytest.mark.parametrize("modules", [
    ["cli.app"],  # every `fleet` command, a mistake's one line included
    ["deployments.serve", "flows.report", "flows.security", "flows.dashboards"],  # `fleet serve`
    ["flows.nightly"],  # a night, until its report step
])
def test_starting_loads_no_report_or_browser_library(modules: list[str]) -> None:
    code = (f"import importlib, json, sys\nfor name in {modules!r}: importlib.import_module(name)\n"
            f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(loaded.stdout) == []
