"""The promises over generated sequences of runs (`night_invariants.NightsMachine`): a bounded number in CI, each
night through `fleet nightly` against an emulator on a real socket, a killed night through a `fleet nightly`
process killed with SIGKILL; `bench/invariants.py` runs hundreds. A failing sequence is printed as the calls that
replay it, the invariants included (no shrinking: each try costs nights); the plain tests below are such replays."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings

from tests.pipeline.night_invariants import KINDS, NightsMachine

pytestmark = pytest.mark.usefixtures("prefect_harness")

TestNightInvariants = pytest.mark.long(35)(NightsMachine.TestCase)  # its sequences lead a worker's share
# two derandomized sequences: since each draw kills a night for real (a `fleet nightly` process) and closes windows
# on synced work, a sequence costs more, and the suite's 8 minutes on 2 cores have no room for a third;
# `bench/invariants.py` runs the hundreds
TestNightInvariants.settings = settings(max_examples=2, stateful_step_count=8, deadline=None, derandomize=True,
                                        phases=[Phase.explicit, Phase.generate], database=None,
                                        suppress_health_check=list(HealthCheck))


def test_a_dry_night_is_listed_as_one() -> None:
    """A sequence `bench/invariants.py` found (11 of 133 sequences, each at a dry night): `fleet runs` lists a dry
    run as "dry run  would update ...", which the check of `fleet runs` misread as another status."""
    state = NightsMachine()
    try:
        state.a_first_whole_fleet_night()
        state.check_all()
        state.a_night("dry", 1)
        state.check_all()
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
        for step in (state.a_first_whole_fleet_night, lambda: state.offer("visual", {0, 1}),
                     lambda: state.a_night("whole", 0)):
            step()
            state.check_all()  # as Hypothesis checks every invariant after each step
        release = state.releases["100.1.0"]
        assert release.first_broke == 2 and release.broke == {state.sites[0], state.sites[1]}
        for step in (lambda: state.a_night("whole", 0), lambda: state.offer_later("100.1.0", {2}),
                     lambda: state.a_night("whole", 0)):
            step()
            state.check_all()
        assert state.version_on(state.truth(), state.sites[2]) != "100.1.0"
        assert state.sites[2] not in release.broke
    finally:
        state.teardown()


@pytest.mark.long(30)
def test_a_night_killed_on_one_dashboard_then_the_service_goes_on() -> None:
    """Issue 44's sequence as the machine draws it: a night killed with SIGKILL while an update's answer is lost,
    a night against a second dashboard in the same home (it waited for the killed run, accounted for its items on
    the wrong dashboard and failed, night after night), a vulnerability published and the hourly security run, and
    the dashboard's next night, which accounts for the killed one. Every promise is checked after each step."""
    state = NightsMachine()
    try:
        for step in (state.a_first_whole_fleet_night, lambda: state.offer("good", {0, 1, 2, 3}),
                     lambda: state.a_night_killed(1, True, {0})):
            step()
            state.check_all()
        assert state.last.kind == "killed" and state.killed, "the night was killed before it ended"
        for step in (state.a_night_on_another_dashboard, lambda: state.a_vulnerability_published("100.1.0"),
                     state.a_security_run, lambda: state.a_night("whole", 0)):
            step()
            state.check_all()
        assert not state.killed, "the killed night was accounted for by its own dashboard's next run"
    finally:
        state.teardown()
