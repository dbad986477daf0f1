"""The wire under the client: httpx's API over aiohttp's HTTP/1.1 engine (`httpx-aiohttp`), which costs the
night about half the CPU per request of httpx's own transport (`bench/wire.py`).

Its errors are mapped again here, from the aiohttp error underneath, so that the client tells "never sent" from
"sent, the answer lost" exactly as it does over httpx's own transport: `httpx-aiohttp` maps every dropped
connection to `ConnectTimeout`, which the client reads as "never sent" and would retry, sending a write twice.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

# aiohttp's errors in the order they are told apart (a subclass before its base); only the first two mean the
# request never left
_EXACT: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ClientConnectorError, httpx.ConnectError),  # refused, DNS, TLS certificate: before sending
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),  # no connection within the connect timeout
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),  # a malformed answer
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (TimeoutError, httpx.ReadTimeout),  # ServerTimeoutError and any other timeout once connected
    (aiohttp.ClientError, httpx.ReadError),  # a reset mid-request and anything else: it may have been sent
)


def exact_error(error: BaseException, request: httpx.Request) -> httpx.TransportError:
    """The httpx error httpx's own transport raises for what went wrong underneath `error`."""
    cause = error.__cause__ if isinstance(error, httpx.TransportError) and error.__cause__ else error
    for aiohttp_type, httpx_type in _EXACT:
        if isinstance(cause, aiohttp_type):
            return httpx_type(str(cause) or type(cause).__name__, request=request)
    if isinstance(error, httpx.TransportError):
        return error
    return httpx.ReadError(str(error) or type(error).__name__, request=request)


class _ExactStream(httpx.AsyncByteStream):
    """An answer's body, read with the same error mapping (a connection dropped mid-body is "sent")."""

    def __init__(self, stream: httpx.AsyncByteStream, request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except (TimeoutError, httpx.TransportError, aiohttp.ClientError) as error:
            raise exact_error(error, self._request) from error

    async def aclose(self) -> None:
        await self._stream.aclose()


def tls_context(verify: bool = True) -> ssl.SSLContext:
    """The process's TLS context for `verify`, made once: loading the CA bundle costs about 20 ms of CPU, which every
    client and every chunk's probe client paid again. It follows SSL_CERT_FILE and SSL_CERT_DIR as httpx does."""
    return _tls_context(verify, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls_context(verify: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context(verify=verify)


class AiohttpWire(httpx.AsyncBaseTransport):
    """`httpx-aiohttp`'s transport with TLS verification as configured, no cookie jar of its own (httpx keeps
    the client's) and the client's exact error mapping."""

    def __init__(self, *, verify: bool = True, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits()
        self._limits = limits
        self._transport = AiohttpTransport(verify=tls_context(verify), limits=limits, client=self._session)

    def _session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            ssl=self._transport.ssl_context,
            limit=self._limits.max_connections or 0,
            keepalive_timeout=self._limits.keepalive_expiry,
        )
        session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())
        # aiohttp sends a GET, PUT or DELETE again by itself when the connection drops (aio-libs/aiohttp#10790,
        # no public switch): the client decides what is sent again, so that a lost PUT stays "unknown"
        session._retry_connection = False
        return session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self._transport.handle_async_request(request)
        except (TimeoutError, httpx.TransportError, aiohttp.ClientError) as error:
            raise exact_error(error, request) from error
        if isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = _ExactStream(response.stream, request)
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()
