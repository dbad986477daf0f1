"""The client keeps at most `max_connections` requests in flight; the rest wait their turn, however long the
calls ahead of them take (httpx alone would give up on them after its pool timeout)."""

from __future__ import annotations

import asyncio

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from dashboard import DashboardClient


class SlowDashboard:
    """Answers one site per request, slower than the client's pool timeout; counts requests in flight."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.in_flight = self.most_in_flight = 0
        self.app = Starlette(routes=[Route("/wp-json/svc/v2/sites/{site_id:int}", self.site)])

    async def site(self, request: Request) -> JSONResponse:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.in_flight -= 1
        site_id = request.path_params["site_id"]
        return JSONResponse({"success": 1, "data": {"id": site_id, "url": f"https://s{site_id}.example/",
                                                    "name": f"Site {site_id}"}})


async def test_requests_beyond_the_limit_wait_instead_of_timing_out():
    dashboard = SlowDashboard(seconds=0.2)
    client = DashboardClient.from_credentials(
        {"base_url": "http://dash.test/wp-json", "namespace": "svc", "api_keys": {"read_write": "s==k"}},
        transport=httpx.ASGITransport(dashboard.app), max_connections=2, connect_timeout=0.05, max_attempts=1,
    )
    async with client:
        sites = await asyncio.gather(*(client.get_site(site_id) for site_id in range(1, 9)))
    assert [site.id for site in sites] == list(range(1, 9))
    assert dashboard.most_in_flight == 2
