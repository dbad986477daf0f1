"""What a `fleet` process loads before it does anything: the CLI, `fleet serve` (which only registers the flows)
and the night's flow leave out the report's libraries (pandas, matplotlib) and the browser's (Playwright), which
load when a report is made or a page shot. Each of these processes paid about 2 s of CPU for them, a mistake's
one line included."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pandas", "matplotlib", "playwright")


STARTS = {  # what each kind of process imports first
    "every `fleet` command, a mistake's one line included": ["cli.app"],
    "`fleet serve`": ["deployments.serve", "flows.report", "flows.security", "flows.dashboards"],
    "a night, until its report step": ["flows.nightly"],
}


def test_starting_loads_no_report_or_browser_library() -> None:
    """One interpreter imports each start's modules in turn and says, after each, which heavy library is loaded
    (a module a start shares with one before it is imported once: what it loads is loaded by then already)."""
    code = (f"import importlib, json, sys\nfor modules in {list(STARTS.values())!r}:\n"
            "    for name in modules: importlib.import_module(name)\n"
            f"    print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    said = dict(zip(STARTS, map(json.loads, loaded.stdout.splitlines()), strict=True))
    assert said == dict.fromkeys(STARTS, []), said
