"""The night's calls under MainWP's own limits on calls to child sites, without Prefect or HTTP: a fake dashboard
that records which calls are open at once, fed the servers sites live on."""

from __future__ import annotations

import asyncio
from collections import Counter

from dashboard.models import ConnectionLimits
from fleet.engine.lanes import split_into_lanes
from fleet.pacing.call_sizing import CallSizer, Operation, Work, send_sized
from fleet.pacing.child_slots import ChildSlots, grouped_by_server, server_key
from fleet.rules.plan import PlanCohort
from tests.pipeline.test_plan import P, plan_of, site, upd

# sites 1-12 on three servers, dealt the way agencies fill them: mostly in runs, one site moved later
SERVERS = {1: "a", 2: "a", 3: "a", 4: "b", 5: "b", 6: "c", 7: "c", 8: "c", 9: "c", 10: "a", 11: "d", 12: "e"}


class OpenCalls:
    """Sends each call after a short pause, recording the calls open at once, in all and per server."""

    def __init__(self, slots: ChildSlots) -> None:
        self.slots, self.open, self.per_server = slots, 0, Counter()
        self.most_open, self.most_per_server, self.calls = 0, 0, []

    async def send(self, key: object, work: list[Work]) -> tuple[None, float]:
        servers = {self.slots.server(part.site_id) for part in work}
        self.open += 1
        self.per_server.update(servers)
        self.most_open = max(self.most_open, self.open)
        self.most_per_server = max(self.most_per_server, *self.per_server.values())
        self.calls.append([part.site_id for part in work])
        await asyncio.sleep(0.01)
        self.open -= 1
        self.per_server.subtract(servers)
        return None, 2.0 * len(work)


def night(limits: ConnectionLimits) -> tuple[CallSizer, OpenCalls]:
    slots = ChildSlots(limits, servers=SERVERS)
    sizer = CallSizer(budget=20, slots=slots)
    sizer.learn(Operation.sync, [Work(99)], 2.0)  # an ordinary site measured: calls carry several sites
    sizer.seen.update(SERVERS)
    return sizer, OpenCalls(slots)


async def test_no_two_calls_are_open_on_one_server_and_a_servers_sites_share_a_call():
    sizer, dashboard = night(ConnectionLimits())
    await send_sized(sizer, Operation.sync, {None: [Work(site) for site in SERVERS]}, dashboard.send, limit=8)
    assert dashboard.most_per_server == 1, "a call never waits inside the dashboard on another's server"
    assert sorted(site for call in dashboard.calls for site in call) == sorted(SERVERS), "every site, once"
    assert any({1, 2, 3, 10} <= set(call) for call in dashboard.calls), "server a's sites in one call"


async def test_the_dashboards_own_maximum_of_open_calls_is_kept_whatever_the_night_may_send():
    sizer, dashboard = night(ConnectionLimits(maximum_requests=2, maximum_ip_requests=0))
    work = {slug: [Work(site, 1, (slug,))] for site in SERVERS for slug in (f"p{site}",)}  # one call per site
    sizer.learn(Operation.update_item, [Work(99, 1, ("x",))], 3.0)
    await send_sized(sizer, Operation.update_item, work, dashboard.send, limit=8)
    assert dashboard.most_open == 2 and len(dashboard.calls) == len(SERVERS)


async def test_checks_are_not_held_to_the_limits_as_mainwp_calls_them_without_its_constraints():
    sizer, dashboard = night(ConnectionLimits(maximum_requests=1))
    work = {site: [Work(site)] for site in SERVERS}
    await send_sized(sizer, Operation.check, work, dashboard.send, limit=8)
    assert dashboard.most_open > 1


def test_sites_of_one_server_after_the_first_wait_out_the_delay_in_the_calls_size():
    sizer = CallSizer(budget=20, slots=ChildSlots(ConnectionLimits(), servers=SERVERS))
    sizer.learn(Operation.sync, [Work(99)], 0.25)  # the real lab's children: a quarter of a second of work
    sizer.seen.update(SERVERS)
    same = [Work(site) for site in (6, 7, 8, 9)]
    spread = [Work(site) for site in (1, 4, 6, 11)]
    assert sizer.predict(Operation.sync, same) == 0.25 + 3 * 1.0, "each after the first starts 1 s after"
    assert sizer.predict(Operation.sync, spread) == 4 * 0.25
    sizer.learn(Operation.sync, same, 3.25)  # learned as a quarter of a second per site, not 0.8
    assert sizer.estimate(Operation.sync) == 0.25


def test_a_servers_sites_share_a_lane_and_an_unknown_ip_is_a_server_of_its_own():
    assert grouped_by_server([1, 4, 2, 6, 10, 3], SERVERS.get) == [1, 2, 10, 3, 4, 6]
    assert server_key(5, "") != server_key(6, "") and server_key(5, "10.0.0.1") == "10.0.0.1"
    ids = (1, 4, 2, 6, 10)
    plan = plan_of([site(i, ip=SERVERS[i]) for i in ids], [upd(i, P, f"p{i}") for i in ids])
    lanes = split_into_lanes(plan, PlanCohort(name="all", site_ids=list(ids)), lane_size=3)
    assert [[site.id for site in lane.sites] for lane in lanes] == [[1, 2, 10], [4, 6]]


async def test_a_call_that_starts_past_a_busy_server_goes_on_with_the_sites_after_it():
    sizer, dashboard = night(ConnectionLimits())
    busy = {"a"}
    sizer.slots.hold(busy)  # another step's call is open on server a
    calls = asyncio.create_task(
        send_sized(sizer, Operation.sync, {None: [Work(site) for site in SERVERS]}, dashboard.send, limit=1))
    await asyncio.sleep(0.005)
    sizer.slots.release(busy)
    await calls
    assert dashboard.calls[0] == [4, 5, 6, 7, 8, 9, 11, 12], "every free server's sites after a's, not 4 alone"
    assert sorted(site for call in dashboard.calls for site in call) == sorted(SERVERS)
