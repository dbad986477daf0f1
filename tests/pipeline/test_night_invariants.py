"""The promise over generated sequences of nights (`night_invariants.NightsMachine`): a bounded number in CI, each
night through `fleet nightly` against an emulator on a real socket; `bench/invariants.py` runs hundreds. A failing
sequence is printed as the calls that replay it (no shrinking: each try costs nights)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings

from tests.pipeline.night_invariants import NightsMachine

pytestmark = pytest.mark.usefixtures("prefect_harness")

TestNightInvariants = NightsMachine.TestCase
TestNightInvariants.settings = settings(max_examples=4, stateful_step_count=8, deadline=None, derandomize=True,
                                        phases=[Phase.explicit, Phase.generate], database=None,
                                        suppress_health_check=list(HealthCheck))


def test_a_dry_night_is_listed_as_one() -> None:
    """A sequence `bench/invariants.py` found (11 of 133 sequences, each at a dry night): `fleet runs` lists a dry
    run as "dry run  would update ...", which the check of `fleet runs` misread as another status."""
    state = NightsMachine()
    try:
        state.a_first_whole_fleet_night()
        state.a_night("dry", 1)
    finally:
        state.teardown()
