"""The promise over generated sequences of nights (`night_invariants.NightsMachine`): a bounded number in CI, each
night through `fleet nightly` against an emulator on a real socket; `bench/invariants.py` runs hundreds. A failing
sequence is printed as the calls that replay it (no shrinking: each try costs nights)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings

from tests.pipeline.night_invariants import KINDS, NightsMachine

pytestmark = pytest.mark.usefixtures("prefect_harness")

TestNightInvariants = pytest.mark.long(60)(NightsMachine.TestCase)  # its sequences lead a worker's share
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


@pytest.mark.long(20)
@pytest.mark.skipif("visual" not in KINDS, reason="no Chromium: a visual break is seen only in screenshots")
def test_a_visual_break_is_held_for_a_lagging_site_and_checked_on_every_night() -> None:
    """A release that takes the stylesheet away while the pages answer 200 breaks the two sites offered it first;
    nights later a third site is offered it and it is withheld there, a quiet night between. Each night is checked
    against the emulator's ground truth (a violation fails the test); the release is recorded as a break."""
    state = NightsMachine()
    try:
        state.a_first_whole_fleet_night()
        state.offer("visual", {0, 1})
        state.a_night("whole", 0)
        release = state.releases["100.1.0"]
        assert release.first_broke == 2 and release.broke == {state.sites[0], state.sites[1]}
        state.a_night("whole", 0)
        state.offer_later(0, {2})
        state.a_night("whole", 0)
        assert state.version_on(state.truth(), state.sites[2]) != "100.1.0"
        assert state.sites[2] not in release.broke
    finally:
        state.teardown()
