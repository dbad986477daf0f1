"""Both engines under the client (aiohttp's, the default, and httpx's own) tell "never sent" from "sent, the
answer lost" the same way, against servers over a real socket that fail the way networks do."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dashboard import DashboardClient
from dashboard.errors import DashboardError, OutcomeUnknown, TransportError
from dashboard.wire import AiohttpWire
from tests.tls import Certificate

ENGINES = ("aiohttp", "httpx")
KEY = "a" * 40 + "==" + "b" * 40
ANSWER = b'{"count": 3}'
CONNECTION_SECONDS = 30  # the longest a server's connection thread lives, should a client never close
KEEP_ALIVE_SECONDS = 2.0  # a web server's keep-alive as hosts shorten it (Apache's default is 5 s, uvicorn's 5 s)
TAG = b'{"data": {"id": 7, "name": "kept", "color": ""}}'


class Misbehaving(socketserver.ThreadingTCPServer):
    """Reads each request whole, counts it, then answers as `behaviour` says. `finish()` waits for every
    connection's thread, so the count it returns is final however slowly the machine ran them."""

    daemon_threads = False  # server_close() joins the connections' threads
    block_on_close = True
    allow_reuse_address = True

    def __init__(self, behaviour: str, certificate: Certificate | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.requests = 0
        self.tls = certificate.server_context() if certificate else None
        self.released = threading.Event()  # "silent" holds its answer until the test is done
        self.answer = ANSWER

    def finish(self) -> int:
        """Stop serving, let the silent connections go, wait for every connection's thread; the requests read."""
        self.released.set()
        self.shutdown()
        self.server_close()
        return self.requests

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        if self.tls is not None:
            connection.settimeout(5)
            try:
                connection = self.tls.wrap_socket(connection, server_side=True)
            except OSError:  # the client refused our certificate: nothing was sent
                connection.close()
                raise
        return connection, address

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.server_address[1]}/wp-json"


class _Handler(socketserver.BaseRequestHandler):
    server: Misbehaving

    def handle(self) -> None:
        answered = time.monotonic()
        while self._read_request():
            self.server.requests += 1
            behaviour = self.server.behaviour
            # "keep_alive": the server closes a connection idle past its keep-alive as the client's next request
            # comes in on it (the two cross on the wire): that request is read, and never answered
            if behaviour == "ok" or (behaviour == "keep_alive" and time.monotonic() - answered < KEEP_ALIVE_SECONDS):
                answer = self.server.answer
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                     + str(len(answer)).encode() + b"\r\n\r\n" + answer)
                answered = time.monotonic()
                continue
            if behaviour == "reset":  # RST instead of FIN
                self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif behaviour == "half_body":
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
                                     b"\r\n{\"count\":")
            elif behaviour == "not_http":
                self.request.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
            elif behaviour == "silent":  # no answer until the client has given up, however long that takes
                self.server.released.wait(timeout=CONNECTION_SECONDS)
            return

    def _read_request(self) -> bool:
        self.request.settimeout(CONNECTION_SECONDS)  # a connection the client never closes ends the thread too
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.request.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += self.request.recv(65536)
        return True


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[Misbehaving] = []

    def start(behaviour: str, certificate: Certificate | None = None) -> Misbehaving:
        server = Misbehaving(behaviour, certificate)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.finish()


def client(url: str, engine: str, read_timeout: float = 30, **settings: Any) -> DashboardClient:
    """A client whose read timeout never decides an outcome by the machine's speed: only a server that is silent
    on purpose meets it."""
    credentials = {"base_url": url, "namespace": "svc", "api_keys": {"read_write": KEY}}
    return DashboardClient.from_credentials(
        credentials, http_engine=engine, read_timeout=read_timeout, max_attempts=2, retry_initial=0.005,
        retry_cap=0.01, **settings,
    )


async def outcome(url: str, engine: str, call: str, **settings: Any) -> tuple[type[DashboardError], str]:
    async with client(url, engine, **settings) as dashboard:
        with pytest.raises(DashboardError) as caught:
            await (dashboard.add_tag("lost?") if call == "write" else dashboard.count_sites())
    assert KEY not in str(caught.value)
    return type(caught.value), caught.value.code


@pytest.mark.parametrize("behaviour", ["close", "reset", "half_body", "not_http", "silent"])
async def test_an_answer_lost_after_sending_is_told_apart_the_same_over_both_engines(
    serve: Any, behaviour: str
) -> None:
    # the silent server's answer never comes (it holds it until finish()): only there does the timeout speak
    timeout = {"read_timeout": 0.3} if behaviour == "silent" else {}
    seen = {}
    for engine in ENGINES:
        write, read = serve(behaviour), serve(behaviour)
        wrote = await outcome(write.url, engine, "write", **timeout)
        was_read = await outcome(read.url, engine, "read", **timeout)
        seen[engine] = (wrote, write.finish(), was_read, read.finish())
    # a write whose answer was lost is sent once and is "unknown"; a read is tried again, then fails plainly
    assert seen["aiohttp"] == seen["httpx"] == ((OutcomeUnknown, "no_answer"), 1, (TransportError, "no_answer"), 2)


async def test_a_request_never_sent_is_safe_to_send_again_over_both_engines() -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/wp-json"
    for engine in ENGINES:
        assert await outcome(url, engine, "write") == (TransportError, "connect")


async def test_tls_is_verified_over_both_engines(serve: Any, certificate: Certificate) -> None:
    for engine in ENGINES:
        server = serve("ok", certificate)
        assert await outcome(server.url, engine, "write") == (TransportError, "connect")
        assert server.requests == 0  # refused before a byte of the request went out
        async with client(server.url, engine, verify_tls=False) as dashboard:  # only when told not to
            assert await dashboard.count_sites() == 3
        assert server.requests == 1


async def test_one_tls_context_serves_every_client_and_follows_ssl_cert_file(
    serve: Any, certificate: Certificate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every client and probe client of a night shares one verified TLS context (the CA bundle is loaded once, not
    for each); a CA named by SSL_CERT_FILE is still honoured, as httpx's own transport honours it."""
    assert AiohttpWire()._transport.ssl_context is AiohttpWire(verify=True)._transport.ssl_context
    assert AiohttpWire(verify=False)._transport.ssl_context is not AiohttpWire()._transport.ssl_context
    server = serve("ok", certificate)
    assert await outcome(server.url, "aiohttp", "write") == (TransportError, "connect")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate.cert))
    async with client(server.url, "aiohttp") as dashboard:  # the operator's own CA: trusted, and verified
        assert await dashboard.count_sites() == 3
    assert server.requests == 1


async def test_a_write_after_a_pause_never_goes_out_on_a_connection_the_server_is_closing(serve: Any) -> None:
    """A night pauses between calls (a step's screenshots, a sensor's wait): a connection kept that long can be
    closed by the web server just as the next request goes out on it, and a write sent so is lost ("sent but no
    answer", its outcome unknown). httpx and aiohttp kept an idle connection 5 s, as long as Apache and uvicorn
    keep theirs: a write after 4.7 s of screenshots went out so under a loaded test run. The client keeps one
    idle for less than a web server's shortened keep-alive."""
    for engine in ENGINES:
        server = serve("keep_alive")
        server.answer = TAG
        async with client(server.url, engine) as dashboard:
            await dashboard.add_tag("kept")
            time.sleep(KEEP_ALIVE_SECONDS + 0.5)  # past the server's keep-alive (the event loop idle, as in a pause)
            assert (await dashboard.add_tag("kept")).name == "kept", engine
        assert server.finish() == 2, engine
