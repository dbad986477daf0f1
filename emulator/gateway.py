"""The web server in front of the dashboard's PHP workers, as nginx with PHP-FPM behaves.

nginx reads the whole request body, then hands the request to a PHP worker (`Capacity.serving`: FIFO once all
are busy). If no answer has come `gateway_timeout` modelled seconds after arrival (queue wait included), it
answers `504 Gateway Time-out` with its own HTML page, while PHP carries on to the end: the work lands, the
answer is lost and the worker stays busy until then. Ground truth and the child sites' own pages are not the
dashboard and pass straight through.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emulator.faults import EXEMPT_PREFIXES

if TYPE_CHECKING:
    from emulator.app import Emulator

NGINX_504 = (
    "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n"
    "<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


class GatewayMiddleware:
    """One PHP worker per dashboard request, and the gateway's timeout."""

    def __init__(self, app: ASGIApp, emulator: Emulator) -> None:
        self.app = app
        self.emulator = emulator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
            return
        arrival = time.monotonic()
        body = await read_body(receive)
        capacity = self.emulator.capacity
        work = asyncio.create_task(self._on_a_worker(scope, body, arrival), name=f"php {scope['path']}")
        patience = capacity.gateway_wall_seconds
        try:
            done, _ = await asyncio.wait({work}, timeout=None if patience is None else
                                         max(arrival + patience - time.monotonic(), 0.0))
        except asyncio.CancelledError:  # the client went away: PHP does not notice and carries on
            capacity.carry_on(work)
            raise
        if work in done:
            for message in work.result():
                await send(message)
            return
        capacity.gateway_timeouts += 1
        capacity.carry_on(work)
        await Response(NGINX_504, 504, media_type="text/html")(scope, receive, send)

    async def _on_a_worker(self, scope: Scope, body: bytes, arrival: float) -> list[Message]:
        """Run the request on a worker; its answer is held until the worker's booked work is done."""
        answer: list[Message] = []
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def hold(message: Message) -> None:
            answer.append(message)

        capacity = self.emulator.capacity
        async with capacity.serving(arrival) as lease:
            await self.app(scope, replay, hold)
            capacity.finish_read(lease)
        return answer
