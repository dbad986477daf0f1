"""Calls sized by time: how many sites (or update items) the next call to the dashboard may carry.

A real dashboard works on the sites of one request one after another, on one PHP worker, and its web server
answers 504 after 60 s while the work goes on. So no call may need longer than a budget (20 s by default). The
sizer starts with one-site calls, learns each operation's time per unit (a site for sync and check, an item
for updates) from the answers' elapsed time, and sizes the next calls from it. A call that took much longer
than predicted marks its sites as suspects; a suspect gets calls of its own, which either clear it or measure
how slow it is, and a slow site's work is then cut to what fits the budget on its own.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from fleet.pacing.child_slots import ChildSlots, grouped_by_server

R = TypeVar("R")
log = logging.getLogger("fleet.call_sizing")

GATEWAY_MARGIN = 0.9  # a 504 sooner than this share of the assumed gateway shows a shorter one
SLOW_MARGIN = 1.6  # a call this many times slower than predicted has a slow site in it
GATEWAY_FACTOR = 3.0  # the gateway the budget assumes: three budgets (nginx's 60 s for 20 s), or one learned
TAIL_FACTOR = 10.0  # how much slower than the rest a slow site may be (a child behind a slow update server)
HISTORY = 64  # per-unit times kept per operation (the median of these is the estimate)
JUDGE_AFTER = 5  # answers of an operation before the first ones (one-site calls) are judged slow or not
UNSEEN_SITES = 5  # sites never measured share a call only this many at a time: three slow ones in it would
# pass the gateway (3 x 10 x 2 s), and the fewer share a call, the rarer that is


class Operation(StrEnum):
    """What the sizer times: a site synced, a site checked, an update item applied."""

    sync = "sync"
    check = "check"
    update_item = "update_item"


CONSTRAINED = frozenset({Operation.sync, Operation.update_item})  # MainWP's `$checkConstraints` calls


@dataclass(frozen=True)
class Work:
    """A site's share of a call: `units` of the operation (1 for a sync or check, its items for an update)."""

    site_id: int
    units: int = 1
    slugs: tuple[str, ...] = ()
    part: bool = False  # one of several parts of the site's work: never shares a call with another site


@dataclass
class CallSizer:
    """Per-operation time per unit, per-site slowness, and the budget every call is sized to.

    `budget` <= 0 turns sizing off: every call carries up to `max_sites` sites (today's fixed calls). A
    `max_sites` above the dashboard's `threshold` asks for update calls that queue batch jobs: those are then
    not sized; syncs and checks never pass the threshold.
    """

    budget: float
    max_sites: int = 200
    threshold: int = 200
    first_units: int = 1
    per_unit: dict[Operation, deque[float]] = field(default_factory=dict)
    site_factor: dict[int, float] = field(default_factory=dict)
    suspects: set[int] = field(default_factory=set)
    calls: int = 0
    slow_calls: int = 0
    seen: set[int] = field(default_factory=set)
    lost_sites: set[int] = field(default_factory=set)
    unjudged: dict[Operation, list[tuple[list[Work], float]]] = field(default_factory=dict)
    slots: ChildSlots | None = None  # the dashboard's limits on calls to child sites, once the night read them
    gateway_seen: float | None = None  # how long a gateway's 504 took, once one came sooner than assumed

    def gate(self, operation: Operation) -> ChildSlots | None:
        """The child connections a sized call of `operation` must fit (syncs and updates: MainWP calls checks
        without its constraints), or None."""
        return self.slots if operation in CONSTRAINED and self.sizing(operation) else None

    def ip_waits(self, operation: Operation, work: list[Work]) -> float:
        """Seconds a call spends waiting on MainWP's delay between two calls to one server: each site after the
        first of its server waits what is left of the delay once the one before it has worked."""
        slots = self.gate(operation)
        if slots is None or not slots.ip_delay:
            return 0.0
        per_unit = self.estimate(operation) or 0.0
        seen: set[str] = set()
        waits = 0.0
        for part in work:
            server = slots.server(part.site_id)
            if server in seen:
                waits += max(0.0, slots.ip_delay - per_unit)
            seen.add(server)
        return waits

    def sizing(self, operation: Operation) -> bool:
        return self.budget > 0 and (operation != Operation.update_item or self.max_sites <= self.threshold)

    def estimate(self, operation: Operation) -> float | None:
        """Seconds per unit of `operation` on an ordinary site, or None before any answer."""
        history = self.per_unit.get(operation)
        return statistics.median(history) if history else None

    def factor(self, site_id: int) -> float:
        return self.site_factor.get(site_id, 1.0)

    def alone(self, site_id: int) -> bool:
        """A site seen slow, or suspected of it, gets calls of its own."""
        return site_id in self.suspects or self.factor(site_id) > SLOW_MARGIN

    def settle_seconds(self, operation: Operation, site_ids: list[int]) -> float:
        """How long a read of these sites' state may stay unchanged while `operation` still runs on one of
        them. A lost answer most often hides a slow site not yet known as one, so one unit is allowed the
        slow tail's time (`TAIL_FACTOR`), with room to spare; before anything was measured, three budgets."""
        per_unit = self.estimate(operation)
        if per_unit is None:
            return 3 * max(self.budget, 1.0)
        return 1.5 * per_unit * max(TAIL_FACTOR, *(self.factor(site_id) for site_id in site_ids))

    def predict(self, operation: Operation, work: list[Work]) -> float | None:
        per_unit = self.estimate(operation)
        if per_unit is None:
            return None
        return sum(per_unit * self.factor(part.site_id) * part.units for part in work) + self.ip_waits(operation, work)

    def units_per_call(self, operation: Operation, site_id: int | None = None) -> int:
        """How many units of `operation` fit the budget (on `site_id`, if it is slow)."""
        per_unit = self.estimate(operation)
        if per_unit is None:
            return self.first_units
        per_unit *= self.factor(site_id) if site_id is not None else 1.0
        return max(1, int(self.budget / per_unit)) if per_unit > 0 else 1 << 30

    def unseen_share(self, operation: Operation) -> int:
        """How many sites never measured may share a call: behind a gateway shorter than assumed, a slow-tail site
        among them plus the others must still fit it (behind a 20 s gateway a slow site's sync alone nearly fills
        it: they go one by one)."""
        per_unit = self.estimate(operation)
        if not per_unit or self.gateway_seen is None:
            return UNSEEN_SITES
        return max(1, int(self.gateway_seen / per_unit - TAIL_FACTOR + 1))

    def outlasts(self, operation: Operation, site_id: int) -> bool:
        """Behind a gateway shorter than assumed, one unit of `operation` on this site (slow, or suspected of it)
        is predicted past it: cutting its work buys nothing, each part would meet the gateway. (Behind the gateway
        the budget assumes, a suspect's slowness is a guess that cutting its work keeps safe.)"""
        per_unit = self.estimate(operation)
        return (per_unit is not None and self.gateway_seen is not None and self.alone(site_id)
                and per_unit * self.factor(site_id) > self.gateway_seen)

    def split_slow(self, operation: Operation, work: list[Work]) -> list[Work]:
        """A slow (or suspect) site's update items cut into parts that each fit the budget on their own.

        A site known slow goes first, all of it: its long calls then run beside the ordinary ones instead of
        after them, at the end of the step, with workers idle (the longest work first). A suspect's first part
        goes first and the rest last: by the time the rest is taken, the first part's answer has said whether
        the site is slow. A suspect found ordinary has its remaining parts sent in as few calls as fit (`take`
        joins them); a slow site's go one by one. A part never shares a call with another site: their shared
        slug filter could apply an item of another part twice. A site whose single item outlasts the gateway is
        not cut at all: all its items of the step go first, in one call that meets the gateway once, and its
        outcome is read back (a lost answer is waited out, never sent again), instead of once per item.
        """
        if not self.sizing(operation):
            return work
        first: list[Work] = []
        ordinary: list[Work] = []
        rest: list[Work] = []
        for part in work:
            known_slow = part.site_id not in self.suspects and self.factor(part.site_id) > SLOW_MARGIN
            fits = self.units_per_call(operation, part.site_id) if self.alone(part.site_id) else part.units
            if self.outlasts(operation, part.site_id):
                first.append(part)
            elif part.slugs and part.units > fits:
                pieces = self._cut(part, fits)
                if known_slow:
                    first += pieces
                else:
                    first.append(pieces[0])
                    rest += pieces[1:]
            elif known_slow:
                first.append(part)
            else:
                ordinary.append(part)
        return first + ordinary + rest

    def cap(self, operation: Operation) -> int:
        """Most sites in one call: only updates may be sent as batch jobs, on purpose."""
        return self.max_sites if operation == Operation.update_item else min(self.max_sites, self.threshold)

    def take(self, operation: Operation, queue: deque[Work]) -> list[Work]:
        """The next call's share of `queue`: a suspect or slow site alone, else sites up to the budget (with the
        waits between sites of one server); under the child limits, only sites whose server is free or already
        in the call."""
        cap = self.cap(operation)
        if not self.sizing(operation):
            return [queue.popleft() for _ in range(min(cap, len(queue)))]
        head = queue[0]
        if self.alone(head.site_id):
            if head.part and self.outlasts(operation, head.site_id):
                return [self._rejoined(queue, head.site_id)]
            fits = self.units_per_call(operation, head.site_id)
            if head.slugs and head.units > fits and not self.outlasts(operation, head.site_id):
                # found slow after the step was cut (its answer lost in another call of the step): cut it now
                first, *rest = self._cut(queue.popleft(), fits)
                queue.extendleft(reversed(rest))
                return [first]
            return [queue.popleft()]
        room = self.units_per_call(operation)
        if head.site_id not in self.seen:
            cap = min(cap, UNSEEN_SITES, self.unseen_share(operation))
        taken = [queue.popleft()]
        used = taken[0].units + self._wait_units(operation, taken[:0], taken[0])
        while queue and len(taken) < cap and not self.alone(queue[0].site_id) and self._joins(operation, taken,
                                                                                               queue[0]):
            if queue[0].part != head.part or (head.part and queue[0].site_id != head.site_id):
                break
            units = queue[0].units + self._wait_units(operation, taken, queue[0])
            if used + units > room:
                break
            used += units
            taken.append(queue.popleft())
        return taken

    @staticmethod
    def _cut(work: Work, fits: int) -> list[Work]:
        """A site's items in parts of `fits` units, each a call of its own."""
        return [Work(work.site_id, len(slugs), slugs, part=True)
                for slugs in (work.slugs[start : start + fits] for start in range(0, len(work.slugs), fits))]

    @staticmethod
    def _rejoined(queue: deque[Work], site_id: int) -> Work:
        """A site's parts still queued, as one: cut before the gateway showed that one of its items outlasts it."""
        parts = [part for part in queue if part.site_id == site_id]
        for part in parts:
            queue.remove(part)
        slugs = tuple(slug for part in parts for slug in part.slugs)
        return Work(site_id, sum(part.units for part in parts), slugs, part=True)

    def _joins(self, operation: Operation, taken: list[Work], part: Work) -> bool:
        slots = self.gate(operation)
        if slots is None:
            return True
        server = slots.server(part.site_id)
        return slots.free(server) or server in {slots.server(other.site_id) for other in taken}

    def _wait_units(self, operation: Operation, taken: list[Work], part: Work) -> float:
        per_unit = self.estimate(operation)
        if not per_unit:
            return 0.0
        return (self.ip_waits(operation, [*taken, part]) - self.ip_waits(operation, taken)) / per_unit

    def learn(self, operation: Operation, work: list[Work], elapsed: float | None) -> None:
        """Fold one answer in: the call's time per unit, and whether a site in it is slow.

        The first `JUDGE_AFTER` answers are only kept: one answer is no yardstick (a site the dashboard refuses
        at once answered in half an ordinary sync, and every ordinary site after it was then taken for slow and
        the estimate stayed at the outlier). Once there are enough, they are judged against their median."""
        if elapsed is None or not work:
            return
        self.calls += 1
        self.seen.update(part.site_id for part in work)
        elapsed = max(elapsed - self.ip_waits(operation, work), elapsed / 10)  # the work, not MainWP's delays
        history = self.per_unit.setdefault(operation, deque(maxlen=HISTORY))
        if len(history) < JUDGE_AFTER:
            self.unjudged.setdefault(operation, []).append((work, elapsed))
            if not (len({part.site_id for part in work}) == 1 and self.alone(work[0].site_id)):
                history.append(elapsed / max(sum(part.units for part in work), 1))
            if len(history) >= JUDGE_AFTER:
                for early_work, early_elapsed in self.unjudged.pop(operation):
                    self._judge(operation, early_work, early_elapsed)
            return
        if not self._judge(operation, work, elapsed):
            history.append(elapsed / max(sum(part.units for part in work), 1))

    def _judge(self, operation: Operation, work: list[Work], elapsed: float) -> bool:
        """Whether an answer shows a slow site (marking it, or the call's sites as suspects), against the
        estimate; a one-site call that was not slow clears its site."""
        units = sum(part.units for part in work)
        ordinary = self.estimate(operation) or elapsed / max(units, 1)
        if len({part.site_id for part in work}) == 1:
            site = work[0].site_id
            per_unit = elapsed / max(units, 1)
            if per_unit > ordinary * SLOW_MARGIN:
                self.suspects.discard(site)
                self.site_factor[site] = per_unit / ordinary
                self.slow_calls += 1
                return True
            if site not in self.lost_sites:  # a lost call may have done this one's work: fast, and no proof
                self.suspects.discard(site)
                self.site_factor.pop(site, None)
            return False
        predicted = self.predict(operation, work)
        if predicted is None or elapsed <= predicted * SLOW_MARGIN:
            return False
        # Which site was slow is unknown: each suspect is taken to be the one, as slow as the whole excess
        # makes it, until a call of its own measures it (its next work is cut to fit that).
        # The excess is measured against an estimate that a loaded client inflates, so a suspect is taken
        # for at least the slow tail.
        for part in work:
            if part.site_id not in self.site_factor:
                self.suspects.add(part.site_id)
                others = (units - part.units) * ordinary
                excess = (elapsed - others) / (part.units * ordinary)
                self.site_factor[part.site_id] = max(TAIL_FACTOR, excess)
        self.slow_calls += 1
        return True

    def lost(self, operation: Operation, work: list[Work], gateway_after: float | None = None) -> None:
        """A call's answer was lost (the gateway's 504, a timeout): a site in it is slower than thought, so each
        is taken for at least the slow tail (twice what it was thought to be) and goes alone for the rest of
        the night (a quick answer later proves nothing: the lost call may have done its work already).

        A gateway's 504 that came `gateway_after` seconds after sending says how long the gateway waits: the
        budget assumes one three times its size (20 s for nginx's 60 s), so a shorter gateway shrinks it to a
        third of what was seen, for the rest of the night. Only a 504 that took at least half the time the call
        was predicted to work counts: a quicker one is a fault of the server, not its patience; a slow site
        alone never shrinks it."""
        predicted = self.predict(operation, work)
        timed_out = gateway_after is not None and predicted is not None and gateway_after >= predicted / 2
        for site_id in {part.site_id for part in work}:
            self.lost_sites.add(site_id)
            self.suspects.add(site_id)
            self.site_factor[site_id] = max(TAIL_FACTOR, 2 * self.factor(site_id))
        if timed_out and self.budget > 0 and gateway_after < GATEWAY_MARGIN * GATEWAY_FACTOR * self.budget:
            before, self.budget = self.budget, gateway_after / GATEWAY_FACTOR
            if self.gateway_seen is None:
                log.warning("the dashboard's gateway gave up after %.3g s, not the %.3g s the call budget assumes: "
                            "calls are sized to %.3g s from now on (was %.3g s)", gateway_after,
                            GATEWAY_FACTOR * before,
                            self.budget, before)
            self.gateway_seen = gateway_after
        elif timed_out and self.gateway_seen is not None:  # the quickest 504 is the closest to the gateway's own
            self.gateway_seen = min(self.gateway_seen, gateway_after)


@dataclass
class SizedCall(Generic[R]):
    """One call as sent: its operation's group key, its work, and what the sender made of the answer."""

    key: object
    work: list[Work]
    result: R


Send = Callable[[object, list[Work]], Awaitable[tuple[R, float | None]]]


async def send_sized(
    sizer: CallSizer,
    operation: Operation,
    groups: dict[object, list[Work]],
    send: Send[R],
    limit: int,
    on_done: Callable[[int], object] | None = None,
) -> list[SizedCall[R]]:
    """Send every group's work in calls sized by `sizer`, at most `limit` calls in flight.

    Work of different groups never shares a call (a group is, say, one slug filter). `send(key, work)` returns
    its result and the call's elapsed seconds (None when unknown), which the sizer learns from before the next
    call is cut. `on_done(units)` is told of each finished call.
    """
    slots = sizer.gate(operation)
    if slots is not None:  # a server's sites side by side, so that they can share a call
        groups = {key: grouped_by_server(work, lambda part: slots.server(part.site_id))
                  for key, work in groups.items()}
    queues = [(key, deque(sizer.split_slow(operation, work))) for key, work in groups.items() if work]
    results: list[SizedCall[R]] = []

    def next_call() -> tuple[object, list[Work]] | None:
        """The next call to send, or None when every site left waits on a server (or a slot) in use."""
        queues[:] = [(key, queue) for key, queue in queues if queue]
        if slots is not None and not slots.room():  # without scanning a queue of thousands for nothing
            return None
        for key, queue in queues:
            if slots is None:
                return key, sizer.take(operation, queue)
            ready = next((index for index, part in enumerate(queue) if slots.free(slots.server(part.site_id))), None)
            if ready is None:
                continue
            # the call starts at the first free server's sites and goes on with the sites after them; the sites
            # of busy servers before it keep their place at the head of the queue
            busy = [queue.popleft() for _ in range(ready)]
            work = sizer.take(operation, queue)
            queue.extendleft(reversed(busy))
            return key, work
        return None

    async def sender() -> None:
        while queues:
            call = next_call()
            if call is None:
                if queues and slots is not None:
                    await slots.released()
                continue
            key, work = call
            servers = {slots.server(part.site_id) for part in work} if slots is not None else set()
            if slots is not None:
                slots.hold(servers)
            try:
                result, elapsed = await send(key, work)
            finally:
                if slots is not None:
                    slots.release(servers)
            sizer.learn(operation, work, elapsed)
            results.append(SizedCall(key, work, result))
            if on_done is not None:
                on_done(sum(part.units for part in work))

    await asyncio.gather(*(sender() for _ in range(max(1, limit))))
    return results
