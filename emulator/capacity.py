"""The capacity model: a dashboard of `workers` PHP workers, each serving one request at a time.

A real MainWP Dashboard answers each HTTP request on one PHP-FPM worker, from arrival to answer, and works
the sites of that request one after another (`foreach ( $access_check['allowed'] as $site )` in the
abilities, `MainWP_Sync::sync_site()` per site). Requests past the worker count wait in FIFO order; WP-Cron
runs a background job's chunk on a worker like any other request. So here:

- `serving()` holds one worker for a request (or a cron chunk): it waits its turn, pays the bootstrap cost
  (WordPress loading) and books every operation of the request on that worker, one after another;
- `work()` books one operation's modelled time (scaled by the clock) on the worker of the current request;
- sites listed as slow (a seeded tail, `SlowSites`) take `factor` times as long on every call.

Work is booked back to back: a request's operations start at the previous one's booked end, and a queued
request starts at the moment its worker's last request was booked to end, not when the event loop got round
to waking it. At small time scales that lateness (a millisecond per operation) would otherwise pile up into a
dashboard slower than the one modelled. Total modelled work divided by the workers is then a physical lower
bound a benchmark can compare its wall time with.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from emulator.clock import Clock

log = logging.getLogger(__name__)

# Nominal seconds of dashboard work per operation (per item for `update_item`). `bootstrap` is paid by every
# request and cron chunk before its own work; `read` by a request that touched no child site.
DEFAULT_WORK_SECONDS = {
    "bootstrap": 0.1,
    "read": 0.05,
    "sync": 2.0,
    "check": 1.0,
    "update_item": 3.0,
    "reconnect": 2.0,
    "disconnect": 0.5,
    "plugin_action": 1.0,  # one call to the child to (de)activate plugins
}
DEFAULT_GATEWAY_TIMEOUT = 60.0  # nginx's fastcgi_read_timeout
DEFAULT_SLOW_SITE_RATE = 0.02
DEFAULT_SLOW_SITE_FACTOR = 10.0


class SlowSites:
    """A seeded tail of slow children (a child behind a slow update server): the same sites on every call."""

    def __init__(self, seed: int, rate: float = DEFAULT_SLOW_SITE_RATE,
                 factor: float = DEFAULT_SLOW_SITE_FACTOR) -> None:
        self.seed, self.rate, self.factor = seed, rate, factor
        self._drawn: dict[int, bool] = {}

    def is_slow(self, site_id: int) -> bool:
        slow = self._drawn.get(site_id)
        if slow is None:
            slow = self._drawn[site_id] = random.Random(f"{self.seed}:slow-site:{site_id}").random() < self.rate
        return slow

    def factor_for(self, site_id: int | None) -> float:
        return self.factor if site_id is not None and self.is_slow(site_id) else 1.0

    def among(self, site_ids: Iterable[int]) -> list[int]:
        return sorted(i for i in site_ids if self.is_slow(i))


@dataclass(slots=True)
class Lease:
    """One request's claim on a worker: `booked_until` is when the work booked so far ends (monotonic), and
    `past_gateway` is set once that passes the gateway's `deadline` (judged on modelled time, never on how fast
    the emulator itself runs)."""

    arrival: float
    deadline: float | None = None
    worker: int | None = None
    booked_until: float = 0.0
    touched_sites: bool = False
    past_gateway: asyncio.Event = field(default_factory=asyncio.Event)

    def book(self, wall_seconds: float) -> None:
        self.booked_until += wall_seconds
        if self.deadline is not None and self.booked_until > self.deadline:
            self.past_gateway.set()


_CURRENT: ContextVar[Lease | None] = ContextVar("emulator_worker_lease", default=None)


async def _sleep_until(moment: float) -> None:
    delay = moment - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


class Capacity:
    """The dashboard's PHP workers, their FIFO queue, and a ledger of the work and the waiting they modelled."""

    def __init__(self, clock: Clock, workers: int = 8, work_seconds: dict[str, float] | None = None, *,
                 gateway_timeout: float = DEFAULT_GATEWAY_TIMEOUT, slow_sites: SlowSites | None = None) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        negative = [op for op, seconds in (work_seconds or {}).items() if seconds < 0]
        if negative:
            raise ValueError(f"work seconds must not be negative: {', '.join(sorted(negative))}")
        if gateway_timeout < 0:
            raise ValueError("gateway_timeout must not be negative (0 = no gateway timeout)")
        self.clock = clock
        self.workers = workers
        self.work_seconds = {**DEFAULT_WORK_SECONDS, **(work_seconds or {})}
        self.gateway_timeout = gateway_timeout
        self.slow_sites = slow_sites or SlowSites(0, rate=0.0)
        self._free_at = [0.0] * workers  # when each worker's last booked request ends (monotonic seconds)
        self._idle = list(range(workers))
        self._holding: dict[int, Lease] = {}
        self._queue: deque[asyncio.Future[int]] = deque()
        self.operations: Counter[str] = Counter()
        self.modelled_seconds = 0.0
        self.requests = 0
        self.in_progress = 0
        self.max_in_progress = 0
        self.longest_queue_wait = 0.0  # modelled seconds
        self.gateway_timeouts = 0
        self.carrying_on: set[asyncio.Task[object]] = set()  # requests answered 504, still at work

    def cost(self, operation: str, units: int = 1, site_id: int | None = None) -> float:
        """Nominal seconds that `units` of `operation` take on one worker (on this site)."""
        return self.work_seconds.get(operation, 0.0) * max(units, 0) * self.slow_sites.factor_for(site_id)

    @property
    def gateway_wall_seconds(self) -> float | None:
        """Wall seconds after arrival at which the gateway stops waiting, or None without a gateway."""
        return self.clock.scaled(self.gateway_timeout) if self.gateway_timeout > 0 else None

    # ---- workers -------------------------------------------------------------------------------------------

    def ticket(self, arrival: float | None = None, *, gateway: bool = False) -> Lease:
        """A request's place in line from `arrival` (monotonic), with the gateway's deadline when it has one."""
        arrival = time.monotonic() if arrival is None else arrival
        patience = self.gateway_wall_seconds if gateway else None
        return Lease(arrival, None if patience is None else arrival + patience, booked_until=arrival)

    def hopeless(self, lease: Lease) -> bool:
        """Whether a request still in the queue cannot start before its deadline: every worker is booked past it."""
        if lease.worker is not None or lease.deadline is None:
            return False
        ends = [self._holding[w].booked_until if w in self._holding else self._free_at[w] for w in range(self.workers)]
        return min(ends) > lease.deadline

    async def _acquire(self, lease: Lease) -> None:
        if self._idle and not self._queue:
            worker = self._idle.pop()
        else:
            turn: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._queue.append(turn)
            try:
                worker = await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self._hand_over(turn.result())
                elif turn in self._queue:  # a hand-over may already have passed it by
                    self._queue.remove(turn)
                raise
        lease.worker = worker
        self._holding[worker] = lease
        start = max(lease.arrival, self._free_at[worker])
        self.longest_queue_wait = max(self.longest_queue_wait, (start - lease.arrival) / self.clock.time_scale)
        lease.booked_until = lease.arrival
        lease.book(start - lease.arrival)

    def _hand_over(self, worker: int) -> None:
        """A worker is free: the first request in the queue takes it, else it goes idle."""
        while self._queue:
            turn = self._queue.popleft()
            if not turn.done():
                turn.set_result(worker)
                return
        self._idle.append(worker)

    @contextlib.asynccontextmanager
    async def serving(self, lease: Lease | None = None, *, bootstrap: bool = True) -> AsyncIterator[Lease]:
        """Hold one worker for a request or a cron chunk (FIFO behind the others) until its booked work has
        ended; every `work()` inside books on this worker."""
        lease = lease or self.ticket()
        self.requests += 1
        self.in_progress += 1
        self.max_in_progress = max(self.max_in_progress, self.in_progress)
        try:
            await self._acquire(lease)
            assert lease.worker is not None
            token = _CURRENT.set(lease)
            try:
                if bootstrap:
                    self._book(lease, "bootstrap", 1, None)
                    await _sleep_until(lease.booked_until)
                yield lease
                await _sleep_until(lease.booked_until)
            finally:
                _CURRENT.reset(token)
                self._free_at[lease.worker] = lease.booked_until
                del self._holding[lease.worker]
                self._hand_over(lease.worker)
        finally:
            self.in_progress -= 1

    def _book(self, lease: Lease, operation: str, units: int, site_id: int | None) -> None:
        seconds = self.cost(operation, units, site_id)
        self.operations[operation] += max(units, 0)
        self.modelled_seconds += seconds
        lease.book(self.clock.scaled(seconds))

    async def work(self, operation: str, units: int = 1, site_id: int | None = None) -> None:
        """Book `units` of `operation` (on one site) on the current request's worker and wait until it is done.
        Outside a request (a direct call) the operation holds a worker of its own, without a bootstrap."""
        lease = _CURRENT.get()
        if lease is None:
            async with self.serving(bootstrap=False):
                await self.work(operation, units, site_id)
            return
        self._book(lease, operation, units, site_id)
        if operation not in ("bootstrap", "read"):
            lease.touched_sites = True
        await _sleep_until(lease.booked_until)

    def finish_read(self, lease: Lease) -> None:
        """A request that touched no child site pays its own small read cost."""
        if not lease.touched_sites:
            self._book(lease, "read", 1, None)

    def carry_on(self, work: asyncio.Task[Any]) -> None:
        """Keep a request whose answer the gateway gave up on running to its end."""
        self.carrying_on.add(work)
        work.add_done_callback(self._landed)

    def _landed(self, work: asyncio.Task[Any]) -> None:
        self.carrying_on.discard(work)
        if not work.cancelled() and work.exception() is not None:
            log.error("a request answered 504 failed afterwards", exc_info=work.exception())

    async def stop(self) -> None:
        """Cancel the requests still at work after their 504 (the server is shutting down)."""
        for work in list(self.carrying_on):
            work.cancel()
        await asyncio.gather(*self.carrying_on, return_exceptions=True)

    # ---- ledger --------------------------------------------------------------------------------------------

    def lower_bound_seconds(self) -> float:
        """Wall seconds the work modelled so far needs at the very least: total work (bootstrap included) /
        workers, scaled."""
        return self.clock.scaled(self.modelled_seconds / self.workers)

    def snapshot(self, site_ids: Iterable[int] = ()) -> dict[str, object]:
        return {
            "workers": self.workers,
            "work_seconds": dict(self.work_seconds),
            "gateway_timeout_seconds": self.gateway_timeout,
            "slow_sites": {"rate": self.slow_sites.rate, "factor": self.slow_sites.factor,
                           "site_ids": self.slow_sites.among(site_ids)},
            "operations": dict(self.operations),
            "modelled_seconds": round(self.modelled_seconds, 3),
            "lower_bound_wall_seconds": round(self.lower_bound_seconds(), 6),
            "requests": self.requests,
            "in_progress": self.in_progress,
            "max_in_progress": self.max_in_progress,
            "queued": len(self._queue),
            "longest_queue_wait_seconds": round(self.longest_queue_wait, 3),
            "gateway_timeouts": self.gateway_timeouts,
        }
