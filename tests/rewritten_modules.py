"""The test modules, assertion-rewritten once for a side-by-side run instead of once in every worker.

pytest rewrites each test module's asserts as it imports it, and keeps the result in a pyc only where Python may
write bytecode: where PYTHONDONTWRITEBYTECODE is set (this project's machines, CI) each of the six workers rewrote
all 140 modules again, 3.3 of the 5.6 CPU-s a worker's collection took. The first process writes the pycs while it
makes the run's blank Prefect database (tests/prefect_home.py), and the workers read them (a pyc carries its
source's hash: a changed module is rewritten again). This reads pytest's own rewriting functions, which are not a
public API: where they are missing, nothing is written and the workers rewrite as before."""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatch
from pathlib import Path

import pytest


def modules_pytest_rewrites(root: Path, config: pytest.Config) -> list[Path]:
    """The modules pytest rewrites under `root`: the conftests and the files its `python_files` patterns name."""
    patterns = config.getini("python_files")
    return sorted(path for path in root.rglob("*.py") if path.name == "conftest.py"
                  or any(fnmatch(path.name, pattern) for pattern in patterns))


def rewrite_test_modules(config: pytest.Config, modules: Iterable[Path]) -> int:
    """Write the rewritten pyc of each module whose pyc is missing or stale, as pytest would; how many were written."""
    try:
        from _pytest.assertion.rewrite import (
            PYC_TAIL,
            _read_pyc,
            _rewrite_test,
            _write_pyc,
            assertstate_key,
            get_cache_dir,
        )
    except ImportError:
        return 0
    state = config.stash.get(assertstate_key, None)
    if state is None:  # --assert=plain: nothing is rewritten
        return 0
    written = 0
    for module in modules:
        pyc = get_cache_dir(module) / (module.name[:-3] + PYC_TAIL)
        if _read_pyc(module, pyc) is not None:
            continue
        pyc.parent.mkdir(parents=True, exist_ok=True)
        source_hash, code = _rewrite_test(module, config)
        written += _write_pyc(state, code, source_hash, pyc)
    return written
