"""The capacity model: a dashboard of `workers` PHP workers, each serving one request at a time.

A real MainWP Dashboard answers each HTTP request on one PHP-FPM worker, from arrival to answer, and works
the sites of that request one after another (`foreach ( $access_check['allowed'] as $site )` in the
abilities, `MainWP_Sync::sync_site()` per site). Requests past the worker count wait in FIFO order; WP-Cron
runs a background job's chunk on a worker like any other request. So here:

- `serving()` holds one worker for a request (or a cron chunk): it waits its turn, pays the bootstrap cost
  (WordPress loading) and books every operation of the request on that worker, one after another;
- `work()` books one operation's modelled time (scaled by the clock) on the worker of the current request;
- sites listed as slow (a seeded tail, `SlowSites`) take `factor` times as long on every call;
- the calls MainWP makes to child sites with its connection constraints (syncs and updates,
  `MainWP_Connect::check_constraints`) also wait, on any worker or cron chunk, until fewer than
  `maximum_requests` child calls are open dashboard-wide and fewer than `maximum_ip_requests` to the site's IP
  (`emulator.hosting`), and until `minimum_delay` has passed since the last child call started and
  `minimum_ip_delay` since the last one to that IP started (`ChildConnections`); the worker waits with them, as
  PHP's `usleep` holds it.

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
import math
import random
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from emulator.clock import Clock
from emulator.hosting import site_ip

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
CONSTRAINED_OPERATIONS = ("sync", "update_item")  # the child calls made with `$checkConstraints`
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


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """MainWP's four constraints on its calls to child sites, with the real defaults (0 = no limit)."""

    maximum_requests: int = 4
    minimum_delay: float = 0.2  # seconds
    maximum_ip_requests: int = 1
    minimum_ip_delay: float = 1.0  # seconds

    @classmethod
    def from_options(cls, option: Callable[[str], Any]) -> ConnectionLimits:
        """From the dashboard's options (`mainwp_maximumRequests`, ...: delays in milliseconds)."""

        def number(suffix: str, default: float) -> float:
            value = option(suffix)
            try:
                return max(float(value), 0.0)
            except (TypeError, ValueError):
                return default

        return cls(int(number("maximum_requests", 4)), number("minimum_delay", 200) / 1000,
                   int(number("maximum_ip_requests", 1)), number("minimum_ip_delay", 1000) / 1000)


class ChildConnections:
    """The dashboard's ledger of calls to child sites (its request log): when each booked call starts and ends,
    per IP, and how long calls waited on each limit (nominal seconds)."""

    def __init__(self) -> None:
        self._open: list[tuple[float, float, str]] = []  # (start, end, ip), monotonic wall seconds
        self._last_start = -math.inf
        self._last_ip_start: dict[str, float] = {}
        self.waited: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()  # per IP
        self.work: Counter[str] = Counter()  # nominal seconds per IP
        self.max_open = 0
        self.max_open_per_ip = 0

    def admit(self, ip: str, earliest: float, wall: float, limits: ConnectionLimits, scale: float) -> float:
        """Book one call of `wall` seconds to `ip` at the first moment from `earliest` the limits allow; its start."""
        self._open = [o for o in self._open if o[1] > earliest - 3600 * scale]
        start = earliest
        for _ in range(10_000):
            moved = False
            waits = (("minimum_delay", limits.minimum_delay, self._last_start),
                     ("minimum_ip_delay", limits.minimum_ip_delay, self._last_ip_start.get(ip, -math.inf)))
            for name, delay, last in waits:
                if delay > 0 and last + delay * scale > start:
                    self.waited[name] += (last + delay * scale - start) / scale
                    start, moved = last + delay * scale, True
            caps = (("maximum_requests", limits.maximum_requests, None),
                    ("maximum_ip_requests", limits.maximum_ip_requests, ip))
            for name, cap, on_ip in caps:
                ends = sorted(e for s, e, i in self._open if s <= start < e and on_ip in (None, i))
                if cap > 0 and len(ends) >= cap:
                    free = ends[len(ends) - cap]
                    self.waited[name] += (free - start) / scale
                    start, moved = free, True
            if not moved:
                break
        self._open.append((start, start + wall, ip))
        self._last_start = max(self._last_start, start)
        self._last_ip_start[ip] = max(self._last_ip_start.get(ip, -math.inf), start)
        self.requests[ip] += 1
        self.work[ip] += wall / scale
        at_start = [i for s, e, i in self._open if s <= start < e]
        self.max_open = max(self.max_open, len(at_start))
        self.max_open_per_ip = max(self.max_open_per_ip, at_start.count(ip))
        return start

    def lower_bound(self, limits: ConnectionLimits) -> float:
        """Nominal seconds the child calls booked so far need at the very least under the limits."""
        total = sum(self.requests.values())
        bounds = [max(total - 1, 0) * limits.minimum_delay]
        if limits.maximum_requests > 0:
            bounds.append(sum(self.work.values()) / limits.maximum_requests)
        for ip, count in self.requests.items():
            bounds.append(max(count - 1, 0) * limits.minimum_ip_delay)
            if limits.maximum_ip_requests > 0:
                bounds.append(self.work[ip] / limits.maximum_ip_requests)
        return max(bounds)

    def snapshot(self, limits: ConnectionLimits) -> dict[str, object]:
        return {
            "limits": {"maximum_requests": limits.maximum_requests, "minimum_delay_ms": limits.minimum_delay * 1000,
                       "maximum_ip_requests": limits.maximum_ip_requests,
                       "minimum_ip_delay_ms": limits.minimum_ip_delay * 1000},
            "requests": sum(self.requests.values()),
            "waited_seconds": {name: round(self.waited[name], 3) for name in
                               ("maximum_requests", "minimum_delay", "maximum_ip_requests", "minimum_ip_delay")},
            "max_open": self.max_open,
            "max_open_per_ip": self.max_open_per_ip,
            "lower_bound_seconds": round(self.lower_bound(limits), 3),
        }


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
                 gateway_timeout: float = DEFAULT_GATEWAY_TIMEOUT, slow_sites: SlowSites | None = None,
                 limits: Callable[[], ConnectionLimits] = ConnectionLimits,
                 ip_of: Callable[[int], str] | None = None) -> None:
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
        self.limits = limits
        self.ip_of = ip_of or (lambda site_id: site_ip(self.slow_sites.seed, site_id))
        self.connections = ChildConnections()
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
        wall = self.clock.scaled(seconds)
        if operation in CONSTRAINED_OPERATIONS and site_id is not None:
            start = self.connections.admit(self.ip_of(site_id), lease.booked_until, wall, self.limits(),
                                           self.clock.time_scale)
            wall += start - lease.booked_until
        lease.book(wall)

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
        workers, or what MainWP's connection limits allow its child calls, whichever is longer; scaled."""
        constrained = self.connections.lower_bound(self.limits())
        return self.clock.scaled(max(self.modelled_seconds / self.workers, constrained))

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
            "child_connections": self.connections.snapshot(self.limits()),
        }
