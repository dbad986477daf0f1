"""The dashboard's own limits on its calls to child sites, kept on the night's side of the gateway.

MainWP lets at most `maximum_requests` calls to child sites be open at once, `maximum_ip_requests` per server
IP, 200 ms apart and 1 s apart per IP (`/settings/advanced`; `MainWP_Connect::check_constraints`, for syncs and
updates). A request over them waits inside the dashboard, on a PHP worker, while the gateway's 60 s run. A sized
call of the night works its sites one after another, so it holds one child connection at a time: when the night
keeps at most `maximum_requests` such calls open and never two on one server, none of them waits in there, and
sites sharing a server go in the same call, where they run one after another anyway.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TypeVar

from dashboard.models import ConnectionLimits

T = TypeVar("T")


def server_key(site_id: int, ip: str) -> str:
    """Which server a site's calls count against: its IP, or a server of its own when the IP is unknown."""
    return ip or f"site-{site_id}"


def grouped_by_server(items: Iterable[T], server: Callable[[T], str]) -> list[T]:
    """The items with each server's together, servers in order of first appearance (stable within a server)."""
    order: dict[str, int] = {}
    listed = list(items)
    for item in listed:
        order.setdefault(server(item), len(order))
    return sorted(listed, key=lambda item: order[server(item)])


class ChildSlots:
    """The calls to child sites the night has open: at most the dashboard's limit in all and per server.

    Shared by every step and lane of a night (they may run on different event loops, so a waiter is woken
    through its own loop)."""

    def __init__(self, limits: ConnectionLimits | None = None, time_scale: float = 1.0,
                 servers: dict[int, str] | None = None) -> None:
        self.limits = limits or ConnectionLimits()
        self.time_scale = time_scale
        self.servers = servers or {}  # site id -> `server_key`
        self.open = 0
        self.per_server: Counter[str] = Counter()
        self.most_open = 0
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def server(self, site_id: int) -> str:
        return self.servers.get(site_id) or server_key(site_id, "")

    @property
    def ip_delay(self) -> float:
        """Seconds (on the answers' clock) MainWP keeps between two calls to one server."""
        return self.limits.minimum_ip_delay_ms / 1000 * self.time_scale

    def room(self) -> bool:
        """Whether one more call to child sites can open now, on some server."""
        return not self.limits.maximum_requests or self.open < self.limits.maximum_requests

    def free(self, server: str) -> bool:
        """Whether a call to `server` can open now without waiting inside the dashboard."""
        per_server = self.limits.maximum_ip_requests
        return self.room() and (not per_server or self.per_server[server] < per_server)

    def hold(self, servers: set[str]) -> None:
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        self.per_server.update(servers)

    def release(self, servers: set[str]) -> None:
        self.open -= 1
        self.per_server.subtract(servers)
        waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            loop.call_soon_threadsafe(lambda w=waiter: w.done() or w.set_result(None))

    async def released(self) -> None:
        """Until a call held here is released (or a second passed: a release on another loop may come between a
        caller's look and its wait)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append((loop, waiter))
        await asyncio.wait({waiter}, timeout=1.0)
