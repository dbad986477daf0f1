"""The test modules' rewritten pycs, written once by the first process of a side-by-side run (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from types import CodeType

import pytest
from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, get_cache_dir

from tests.rewritten_modules import modules_pytest_rewrites, rewrite_test_modules


def names_in(code: CodeType) -> set[str]:
    inner = (names_in(const) for const in code.co_consts if isinstance(const, CodeType))
    return {*code.co_names, *code.co_varnames}.union(*inner)


def test_each_module_is_rewritten_once_and_again_when_it_changed(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    module, conftest, helper = tmp_path / "test_sample.py", tmp_path / "conftest.py", tmp_path / "sample.py"
    for path in (module, conftest, helper):
        path.write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    assert modules_pytest_rewrites(tmp_path, pytestconfig) == [conftest, module], "the helper is not rewritten"
    assert rewrite_test_modules(pytestconfig, [module]) == 1
    code = _read_pyc(module, get_cache_dir(module) / (module.name[:-3] + PYC_TAIL))
    assert code is not None and any(name.startswith("@py_assert") for name in names_in(code)), "read as pytest does"
    assert rewrite_test_modules(pytestconfig, [module]) == 0, "a fresh pyc is kept"
    module.write_text("def test_sum():\n    assert 2 + 2 == 4\n")
    assert rewrite_test_modules(pytestconfig, [module]) == 1, "a changed module is rewritten again"
