"""`make clean` removes what the project's commands made in a checkout and says what it removed: afterwards
`git status --ignored` shows only the user's `.env`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")
def test_make_clean_leaves_only_the_users_env(tmp_path: Path) -> None:
    for name in ("Makefile", ".gitignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    subprocess.run(["git", "init", "--quiet"], cwd=tmp_path, check=True)
    made = [".venv/bin/python", ".pytest_cache/v", ".ruff_cache/x", "fleet_maintenance.egg-info/PKG-INFO",
            "demo-output/fleet-state.sqlite", "demo-output/20261126-020000-abcdef12/summary.json",
            "bench/results/nightly.json", "fleet/__pycache__/night.cpython-311.pyc", "__pycache__/a.pyc",
            ".hypothesis/examples/a1/b2", ".coverage", ".coverage.host.123.456"]
    for path in made:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    (tmp_path / ".env").write_text("FLEET_BASE_URL=https://dash.example.com/wp-json\n")

    done = subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, text=True, check=True)

    removed = {line.removeprefix("removed ") for line in done.stdout.splitlines()}
    assert {".venv", "demo-output", "bench/results", "./fleet/__pycache__", ".pytest_cache", ".hypothesis",
            ".coverage", ".coverage.host.123.456"} <= removed
    ignored = [line for line in subprocess.run(["git", "status", "--ignored", "--porcelain"], cwd=tmp_path,
                                               capture_output=True, text=True, check=True).stdout.splitlines()
               if line.startswith("!!")]
    assert ignored == ["!! .env"]
