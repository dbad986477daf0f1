"""The flows stay sentences: no function in flows/ runs past 60 lines (decorators and docstring included); what
grows goes into a named step (a task, an engine function) that the flow asks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

FLOWS = Path(__file__).resolve().parents[2] / "flows"
LONGEST = 60


def function_lengths(source: str) -> dict[str, int]:
    """Each function's lines, from its first decorator to its last line, by qualified name."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno] + [decorator.lineno for decorator in child.decorator_list])
                    lengths[name] = (child.end_lineno or child.lineno) - first + 1
                visit(child, f"{name}.")

    visit(ast.parse(source), "")
    return lengths


def test_the_measure_counts_decorators_nested_functions_and_methods() -> None:
    source = "@flow\nasync def night():\n    def step():\n        pass\n    return 1\n\nclass A:\n    def b(self):\n" \
             "        return 2\n"
    assert function_lengths(source) == {"night": 5, "night.step": 2, "A.b": 2}


@pytest.mark.parametrize("path", sorted(FLOWS.glob("*.py")), ids=lambda path: path.name)
def test_no_function_in_flows_is_longer_than_60_lines(path: Path) -> None:
    too_long = {name: lines for name, lines in function_lengths(path.read_text()).items() if lines > LONGEST}
    assert not too_long, f"{path.name}: longer than {LONGEST} lines: {too_long}: give a step of it a name"
