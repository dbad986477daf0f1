"""Calls sized by time: the sizer on its own (no Prefect, no HTTP), fed the elapsed times a dashboard answers in."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from fleet.pacing.call_sizing import JUDGE_AFTER, CallSizer, Work, send_sized


def measured(sizer: CallSizer, operation: str, per_unit: float) -> None:
    """Enough one-site answers of ordinary sites (ids 1000 on) that the next answers are judged against them."""
    for site_id in range(1000, 1000 + JUDGE_AFTER):
        sizer.learn(operation, [Work(site_id, 1, ("a",))], per_unit)


def sites(*ids: int, units: int = 1) -> deque[Work]:
    return deque(Work(site_id, units, tuple(f"s{n}" for n in range(units)) if units > 1 else ()) for site_id in ids)


def test_the_first_call_is_small_and_the_next_ones_fill_the_budget():
    sizer = CallSizer(budget=20)
    queue = sites(*range(1, 101))
    first = sizer.take("sync", queue)
    assert len(first) == 1
    sizer.learn("sync", first, 2.1)  # one site: bootstrap and 2 s of work
    second = sizer.take("sync", queue)
    assert len(second) == 5, "sites never measured: a few at a time"
    sizer.learn("sync", [Work(site_id) for site_id in range(200, 209)], 9 * 2.1)
    assert len(sizer.take("sync", sites(*range(200, 215)))) == 9  # 9 x 2.1 s fits 20 s, 10 would not


def test_operations_are_learned_apart():
    sizer = CallSizer(budget=20)
    sizer.learn("sync", [Work(1)], 2.0)
    assert sizer.units_per_call("sync") == 10
    assert sizer.units_per_call("update_item") == 1  # nothing known of updates yet: start small
    sizer.learn("update_item", [Work(2, 4, ("a", "b", "c", "d"))], 12.0)
    assert sizer.units_per_call("update_item") == 6


def test_a_call_much_slower_than_predicted_makes_its_sites_suspects_that_go_alone():
    sizer = CallSizer(budget=20)
    measured(sizer, "sync", 2.0)
    call = [Work(site_id) for site_id in range(2, 11)]
    sizer.learn("sync", call, 16.0 + 20.0)  # one of the nine is ten times slower
    assert sizer.suspects == set(range(2, 11))
    assert sizer.estimate("sync") == 2.0, "a call with a slow site does not skew the estimate"
    assert sizer.factor(2) == 10.0, "until measured alone, each suspect is taken for the slow one"
    sizer.learn("sync", [Work(20), Work(21), Work(22)], 12.0)  # slow, though not ten times: the tail until measured
    assert sizer.factor(20) == 10.0
    measured(sizer, "update_item", 3.0)
    assert len(sizer.split_slow("update_item", [Work(2, 3, ("a", "b", "c"))])) == 3, "a suspect's items go one by one"
    queue = sites(2, 3, 50, 51)
    assert [w.site_id for w in sizer.take("sync", queue)] == [2]
    assert [w.site_id for w in sizer.take("sync", queue)] == [3]
    assert [w.site_id for w in sizer.take("sync", queue)] == [50, 51]


def test_a_suspect_measured_alone_is_cleared_or_known_slow():
    sizer = CallSizer(budget=20)
    measured(sizer, "sync", 2.0)
    sizer.learn("sync", [Work(2), Work(3)], 24.0)
    sizer.learn("sync", [Work(2)], 2.1)
    sizer.learn("sync", [Work(3)], 20.0)
    assert not sizer.alone(2)
    assert sizer.alone(3) and 9 < sizer.factor(3) < 10.1


def test_a_slow_sites_update_items_are_cut_to_fit_the_budget_on_their_own():
    sizer = CallSizer(budget=20)
    measured(sizer, "sync", 2.0)
    sizer.learn("sync", [Work(7)], 20.0)  # site 7: ten times slower on every call
    measured(sizer, "update_item", 3.0)
    sizer.learn("sync", [Work(8)], 20.0)  # site 8 too
    parts = sizer.split_slow("update_item", [Work(1, 5, ("a",) * 5), Work(7, 5, ("a", "b", "c", "d", "e")),
                                             Work(8, 1, ("a",))])
    assert [(p.site_id, p.slugs) for p in parts] == [(7, ("a",)), (7, ("b",)), (7, ("c",)), (7, ("d",)),
                                                     (7, ("e",)), (8, ("a",)), (1, ("a",) * 5)], \
        "a site known slow goes first, all of it: its long calls run beside the ordinary ones"


def test_a_site_found_slow_after_its_step_was_cut_is_cut_when_its_turn_comes():
    """Its answer lost in one group's call (one slug filter), its items of another group were still whole: they
    went in one call, and met the gateway a second time."""
    sizer = CallSizer(budget=20)
    measured(sizer, "update_item", 3.0)
    queue = deque(sizer.split_slow("update_item", [Work(7, 3, ("a", "b", "c")), Work(8, 2, ("a", "b"))]))
    assert list(queue) == [Work(7, 3, ("a", "b", "c")), Work(8, 2, ("a", "b"))], "nothing known: whole"
    sizer.lost("update_item", [Work(7, 2, ("x", "y"))])
    assert sizer.take("update_item", queue) == [Work(7, 1, ("a",), part=True)]
    assert sizer.take("update_item", queue) == [Work(7, 1, ("b",), part=True)]
    assert sizer.take("update_item", queue) == [Work(7, 1, ("c",), part=True)]
    assert sizer.take("update_item", queue) == [Work(8, 2, ("a", "b"))]


def test_a_lost_answer_blames_the_sites_in_the_call_never_the_budget():
    sizer = CallSizer(budget=20)
    sizer.learn("update_item", [Work(1, 1, ("a",))], 3.0)
    sizer.lost("update_item", [Work(2, 2, ("a", "b")), Work(3, 2, ("a", "b"))])
    assert sizer.budget == 20 and sizer.suspects == {2, 3} and sizer.factor(2) == 10.0
    sizer.lost("update_item", [Work(2, 1, ("a",))])  # a suspect lost again: slower still
    assert sizer.budget == 20 and sizer.factor(2) == 20.0
    sizer.lost("update_item", [Work(4, 2, ("a", "b"))])  # never seen slow: now it is, and goes alone
    assert sizer.alone(4) and sizer.units_per_call("update_item") == 6
    sizer.learn("update_item", [Work(4, 1, ("c",))], 0.5)  # the lost call had done it already: a quick no-op
    assert sizer.alone(4), "a quick answer after a lost one does not clear the site"


def test_without_a_budget_calls_carry_the_cap_and_updates_above_the_threshold_may_queue():
    sizer = CallSizer(budget=0, max_sites=1000, threshold=200)
    assert len(sizer.take("update_item", sites(*range(450)))) == 450
    assert len(sizer.take("sync", sites(*range(450)))) == 200
    sized = CallSizer(budget=20, max_sites=1000, threshold=200)
    assert len(sized.take("update_item", sites(*range(450)))) == 450, "a cap above the threshold asks for jobs"
    assert len(sized.take("sync", sites(*range(450)))) == 1, "syncs stay sized"


def test_send_sized_keeps_groups_apart_and_no_more_calls_in_flight_than_the_limit():
    sizer = CallSizer(budget=20)
    in_flight = peak = 0
    sent: list[tuple[object, list[int]]] = []

    async def send(key: object, work: list[Work]) -> tuple[int, float]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)
        in_flight -= 1
        sent.append((key, [w.site_id for w in work]))
        return len(work), 2.0 * len(work)

    groups = {"a": [Work(i) for i in range(40)], "b": [Work(i) for i in range(100, 130)]}
    done: list[int] = []
    results = asyncio.run(send_sized(sizer, "sync", groups, send, limit=3, on_done=done.append))
    assert peak <= 3
    assert sorted(s for _, ids in sent for s in ids) == sorted(w.site_id for g in groups.values() for w in g)
    assert all((key == "a") == all(s < 100 for s in ids) for key, ids in sent)
    assert sum(done) == 70 and sum(r.result for r in results) == 70
    assert max(len(ids) for _, ids in sent) == 5 and min(len(ids) for _, ids in sent[:3]) == 1


def test_a_suspects_first_item_goes_first_and_its_rest_goes_in_one_call_once_it_proved_ordinary():
    sizer = CallSizer(budget=20)
    measured(sizer, "sync", 2.0)
    sizer.learn("sync", [Work(2), Work(3)], 24.0)  # 2 or 3 is slow
    measured(sizer, "update_item", 3.0)
    parts = sizer.split_slow("update_item", [Work(2, 3, ("a", "b", "c")), Work(3, 2, ("a", "b")),
                                             Work(4, 2, ("a", "b"))])
    assert [(p.site_id, p.slugs, p.part) for p in parts] == [
        (2, ("a",), True), (3, ("a",), True), (4, ("a", "b"), False), (2, ("b",), True), (2, ("c",), True),
        (3, ("b",), True)]
    queue = deque(parts)
    assert sizer.take("update_item", queue) == [parts[0]]
    assert sizer.take("update_item", queue) == [parts[1]]
    sizer.learn("update_item", [parts[0]], 3.1)  # site 2 is ordinary
    sizer.learn("update_item", [parts[1]], 30.0)  # site 3 is the slow one
    assert [w.site_id for w in sizer.take("update_item", queue)] == [4]
    assert sizer.take("update_item", queue) == [parts[3], parts[4]], "an ordinary suspect's rest in one call"
    assert sizer.take("update_item", queue) == [parts[5]], "the slow site's rest still goes alone"


def test_before_any_update_is_known_a_slow_sites_answer_does_not_become_its_estimate():
    sizer = CallSizer(budget=20)
    measured(sizer, "sync", 2.0)
    sizer.learn("sync", [Work(9)], 20.0)
    sizer.learn("update_item", [Work(9, 1, ("a",))], 30.0)
    assert sizer.estimate("update_item") is None and sizer.alone(9)


def test_a_slow_site_among_the_first_one_site_calls_is_known_once_there_is_something_to_compare():
    sizer = CallSizer(budget=20)
    sizer.learn("sync", [Work(1)], 20.0)  # the night's first answer: nothing to compare it with
    assert not sizer.alone(1)
    for site_id in range(2, 6):
        sizer.learn("sync", [Work(site_id)], 2.0)
    assert sizer.alone(1) and sizer.factor(1) == 10.0
    assert sizer.estimate("sync") == 2.0


def test_one_quick_first_answer_is_no_yardstick_for_the_ordinary_sites_after_it():
    """A site the dashboard refuses at once (known offline) answered first in half a sync: every ordinary site
    after it was taken for slow, went alone for the night, and the estimate stayed at the outlier."""
    sizer = CallSizer(budget=20)
    sizer.learn("sync", [Work(1)], 1.0)
    sizer.learn("sync", [Work(2), Work(3), Work(4)], 6.3)
    for site_id in range(5, 8):
        sizer.learn("sync", [Work(site_id)], 2.1)
    assert not any(sizer.alone(site_id) for site_id in range(1, 8))
    assert sizer.estimate("sync") == 2.1
    sizer.learn("sync", [Work(8)], 21.0)
    assert sizer.alone(8), "once judged against the median, a slow site still shows"


def test_sites_never_measured_share_a_call_only_a_few_at_a_time():
    sizer = CallSizer(budget=20)
    sizer.learn("sync", [Work(1)], 1.0)
    queue = sites(*range(2, 40))
    assert len(sizer.take("sync", queue)) == 5, "three slow ones among twenty would pass the gateway"
    sizer.learn("sync", [Work(site_id) for site_id in range(40, 60)], 20.0)
    assert len(sizer.take("sync", sites(*range(40, 60)))) == 20, "measured sites fill the budget"


def test_a_gateway_shorter_than_the_budget_assumes_is_learned_from_its_first_504(caplog):
    sizer = CallSizer(budget=20)
    sizer.learn("sync", [Work(1)], 2.0)
    call = [Work(site_id) for site_id in range(2, 11)]  # predicted 18 s: a 60 s gateway would have answered
    sizer.lost("sync", call, gateway_after=0.02)  # an injected 504, at once: a fault, not the gateway's patience
    sizer.lost("sync", [Work(11)], gateway_after=61.0)  # nginx's 60 s: what the budget assumes
    assert sizer.budget == 20 and not caplog.records
    sizer.lost("sync", [Work(site_id) for site_id in range(12, 21)], gateway_after=20.5)  # a 20 s gateway
    assert sizer.budget == pytest.approx(20.5 / 3)
    assert sizer.units_per_call("sync") == 3
    sizer.lost("sync", [Work(site_id) for site_id in range(21, 24)], gateway_after=20.2)  # a call already open
    assert sizer.budget == pytest.approx(20.5 / 3), "a second 504 of the same gateway changes nothing"
    assert sizer.gateway_seen == 20.2, "but the quickest 504 is the closest to the gateway's patience"
    assert [record.levelname for record in caplog.records] == ["WARNING"]
    assert "gave up after 20.5 s" in caplog.text


def test_a_site_whose_one_item_outlasts_a_short_gateway_sends_all_its_items_of_a_step_in_one_call():
    sizer = CallSizer(budget=20)
    measured(sizer, "update_item", 3.0)
    sizer.learn("update_item", [Work(6, 1, ("a",)), Work(7, 1, ("a",))], 33.0)  # one of them ten times slower
    cut = sizer.split_slow("update_item", [Work(7, 3, ("a", "b", "c")), Work(8, 1, ("a",))])
    assert [part.units for part in cut] == [1, 1, 1, 1], "30 s an item fits the 60 s gateway assumed: cut"
    sizer.lost("update_item", [cut[0]], gateway_after=20.0)  # its first item alone met a 20 s gateway
    assert sizer.budget == pytest.approx(20 / 3) and sizer.factor(7) >= 10  # 30 s an item: past the gateway
    queue = deque(cut[1:])  # its other two items were cut before the gateway was known: they go back together
    assert sizer.take("update_item", queue) == [Work(8, 1, ("a",))]
    assert sizer.take("update_item", queue) == [Work(7, 2, ("b", "c"), part=True)] and not queue
    assert sizer.split_slow("update_item", [Work(7, 3, ("d", "e", "f"))]) == [Work(7, 3, ("d", "e", "f"))]
    ordinary_suspect = Work(9, 3, ("a", "b", "c"))
    sizer.suspects.add(9)
    sizer.site_factor[9] = 2.0  # 6 s an item: fits the gateway, so its items are still cut to fit the budget
    assert len(sizer.split_slow("update_item", [ordinary_suspect])) == 3


def test_behind_a_short_gateway_sites_never_measured_go_one_by_one():
    sizer = CallSizer(budget=20)
    sizer.learn("sync", [Work(1)], 2.0)
    assert len(sizer.take("sync", sites(*range(10, 30)))) == 5  # a slow one among five: 28 s, under nginx's 60 s
    sizer.lost("sync", [Work(2), Work(3), Work(4)], gateway_after=20.0)
    assert len(sizer.take("sync", sites(*range(10, 30)))) == 1  # a slow one alone nearly fills the 20 s
    sizer.seen.update(range(10, 30))
    assert len(sizer.take("sync", sites(*range(10, 30)))) == 3, "measured sites fill the budget (6.7 s)"
