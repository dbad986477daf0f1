"""The web server in front of the dashboard's PHP workers, as nginx with PHP-FPM behaves.

nginx reads the whole request body (refusing one past `client_max_body_size`, 1 MiB by default, with 413),
then hands the request to a PHP worker (`Capacity.serving`: FIFO once all
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

from emulator.capacity import Lease
from emulator.faults import EXEMPT_PREFIXES

RECHECK_SECONDS = 0.005

if TYPE_CHECKING:
    from emulator.services import Emulator



def nginx_page(status: int, title: str) -> Response:
    """nginx's own error page (its answer, not WordPress's)."""
    page = (f"<html>\r\n<head><title>{status} {title}</title></head>\r\n<body>\r\n"
            f"<center><h1>{status} {title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
    return Response(page, status, media_type="text/html")


class BodyTooLarge(Exception):
    """The body passed `client_max_body_size`."""


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body, as nginx buffers it before passing the request on; `limit` 0: no limit."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit and size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


REQUEST_LINE_LIMIT = 8192  # nginx's large_client_header_buffers (4 8k): a longer request line is a 414
# the HTTP server in front of the app reads request heads up to this size, so that nginx's 414 can be given
# (h11's own limit, 16 KiB, resets the connection instead)
HEAD_LIMIT_BYTES = 1024 * 1024


def request_line_length(scope: Scope) -> int:
    """`METHOD /path?query HTTP/1.1` as it came on the wire."""
    target = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string") or b""
    return len(scope["method"]) + 1 + len(target) + (len(query) + 1 if query else 0) + len(" HTTP/1.1")


class GatewayMiddleware:
    """One PHP worker per dashboard request, and the gateway's timeout."""

    def __init__(self, app: ASGIApp, emulator: Emulator) -> None:
        self.app = app
        self.emulator = emulator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and request_line_length(scope) > REQUEST_LINE_LIMIT:
            await nginx_page(414, "Request-URI Too Large")(scope, receive, send)  # nginx's own answer
            return
        if scope["type"] != "http" or scope["path"].startswith(EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
            return
        arrival = time.monotonic()
        limit = self.emulator.config.max_body_bytes
        try:
            if limit and declared_length(scope) > limit:
                raise BodyTooLarge
            body = await read_body(receive, limit)
        except BodyTooLarge:  # refused by nginx itself: no PHP worker sees it
            await nginx_page(413, "Request Entity Too Large")(scope, receive, send)
            return
        capacity = self.emulator.capacity
        lease = capacity.ticket(arrival, gateway=True)
        work = asyncio.create_task(self._on_a_worker(scope, body, lease), name=f"php {scope['path']}")
        try:
            gave_up = await self._gives_up(lease, work)
        except asyncio.CancelledError:  # the client went away: PHP does not notice and carries on
            capacity.carry_on(work)
            raise
        if not gave_up:
            for message in work.result():
                await send(message)
            return
        capacity.gateway_timeouts += 1
        capacity.carry_on(work)
        await nginx_page(504, "Gateway Time-out")(scope, receive, send)

    async def _gives_up(self, lease: Lease, work: asyncio.Task[list[Message]]) -> bool:
        """Wait for the answer (False) or until the gateway stops waiting (True, at the deadline). The request is
        past the gateway when its queue wait plus booked work passes the timeout in modelled time; an emulator
        merely slow to compute an answer that is due in time is waited for."""
        if lease.deadline is None:
            await asyncio.wait({work})
            return False
        past = asyncio.create_task(lease.past_gateway.wait())
        capacity = self.emulator.capacity
        try:
            timeout = max(lease.deadline - time.monotonic(), 0.0)
            while True:
                await asyncio.wait({work, past}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if work.done():
                    return False
                if past.done() or capacity.hopeless(lease):
                    delay = lease.deadline - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    return True
                timeout = RECHECK_SECONDS  # past the deadline in wall time only: still due in time
        finally:
            past.cancel()

    async def _on_a_worker(self, scope: Scope, body: bytes, lease: Lease) -> list[Message]:
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
        async with capacity.serving(lease):
            await self.app(scope, replay, hold)
            capacity.finish_read(lease)
        return answer
