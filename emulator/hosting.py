"""Which hosting server (IP address) each child site lives on, seeded.

Agencies put several client sites on one server, so MainWP's per-IP connection limits bite. Sites are dealt to
servers in id order (an agency adds clients to the server it is filling) in runs whose length is geometric with a
mean of 5 sites and capped at 30: about one server in five hosts a single site, a few host twenty or more. The
addresses are private (10.20.0.0/16), one per server.
"""

from __future__ import annotations

import random

MEAN_SITES_PER_SERVER = 5
MAX_SITES_PER_SERVER = 30

_RUNS: dict[int, tuple[random.Random, list[int]]] = {}  # seed -> (its stream, server index of site id i + 1)


def server_of(seed: int, site_id: int) -> int:
    """The index of the server hosting site `site_id` (ids from 1)."""
    rng, servers = _RUNS.setdefault(seed, (random.Random(f"{seed}:hosting"), []))
    while len(servers) < site_id:
        size = 1
        while size < MAX_SITES_PER_SERVER and rng.random() > 1 / MEAN_SITES_PER_SERVER:
            size += 1
        server = servers[-1] + 1 if servers else 0
        servers.extend([server] * size)
    return servers[max(site_id, 1) - 1]


def site_ip(seed: int, site_id: int) -> str:
    """The IP address the dashboard records for a site."""
    server = server_of(seed, site_id)
    return f"10.20.{server // 250}.{server % 250 + 1}"
