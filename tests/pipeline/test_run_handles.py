"""A task made of a plain step and what its run hands it: the step gets each handle made at call time, and the
signature Prefect reads (the task's parameters) is the step's without them."""

from __future__ import annotations

import inspect

import pytest
from prefect import flow, task

from orchestration.run_handles import with_run_handles


async def step(sites: list[int], settings: str = "s", *, gate: str = "plain", log: str = "plain") -> tuple:
    return sites, settings, gate, log


def test_the_signature_is_the_steps_without_what_the_run_hands_in() -> None:
    wrapped = with_run_handles(step, gate=lambda: "run's gate")
    assert list(inspect.signature(wrapped).parameters) == ["sites", "settings", "log"]
    assert wrapped.__name__ == "step" and wrapped.__doc__ == step.__doc__


def test_a_handle_the_step_does_not_take_is_refused_when_the_task_is_made() -> None:
    with pytest.raises(TypeError, match="takes no outbox"):
        with_run_handles(step, outbox=lambda: None)


@pytest.mark.usefixtures("prefect_harness")  # the worker's server: without it, Prefect starts one of its own
async def test_each_handle_is_made_when_the_task_runs_inside_its_flow() -> None:
    made: list[str] = []

    def gate() -> str:
        made.append("gate")
        return f"gate {len(made)}"

    step_task = task(with_run_handles(step, gate=gate), name="step")

    @flow
    async def night() -> list[tuple]:
        return [await step_task([1], "x"), await step_task(sites=[2], log="mine")]

    assert made == []  # nothing made before a task runs
    assert await night() == [([1], "x", "gate 1", "plain"), ([2], "s", "gate 2", "mine")]
