"""The emulator as a test double: a real server on a free loopback port in a background thread
(`EmulatorServer`), or in process over `httpx.ASGITransport` (`InProcessEmulator`)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from types import TracebackType
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette

from emulator.app import Emulator, create_app
from emulator.config import EmulatorConfig
from emulator.gateway import HEAD_LIMIT_BYTES


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class EmulatorServer:
    """`with EmulatorServer(config) as server:` (or `async with`) -> `server.base_url`, `server.credentials`."""

    def __init__(
        self,
        config: EmulatorConfig | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout: float = 30.0,
    ) -> None:
        self.config = config or EmulatorConfig()
        self.host = host
        self.startup_timeout = startup_timeout
        self.app: Starlette | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        # bound here and handed to uvicorn, so no other server (a test beside this one) takes the port between
        # picking it and listening on it
        self._socket: socket.socket | None = self._bind(port or 0)
        self.port = int(self._socket.getsockname()[1])

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/wp-json"

    @property
    def emulator(self) -> Emulator:
        if self.app is None:
            raise RuntimeError("the emulator server is not running")
        return self.app.state.emulator

    @property
    def credentials(self) -> dict[str, Any]:
        return self.emulator.credentials(self.base_url)

    def _bind(self, port: int) -> socket.socket:
        listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listening.bind((self.host, port))
        except OSError:
            listening.close()
            raise
        return listening

    def start(self) -> EmulatorServer:
        if self._socket is None:  # started again after a stop: the same port
            self._socket = self._bind(self.port)
        self.app = create_app(self.config)
        self.emulator.base_url = self.base_url
        config = uvicorn.Config(
            self.app, host=self.host, port=self.port, log_level="warning", lifespan="on", access_log=False,
            h11_max_incomplete_event_size=HEAD_LIMIT_BYTES,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"emulator:{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the emulator did not start on {self.root_url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.app is not None:
            self.emulator.state.close()
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> EmulatorServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)


class InProcessEmulator:
    """No socket: `transport` for `httpx.AsyncClient(transport=..., base_url=...)`, plus the credentials.
    Use `async with InProcessEmulator(...)` to also run the app's lifespan (the background job runner)."""

    def __init__(self, config: EmulatorConfig | None = None, root_url: str = "http://emulator.test") -> None:
        self.config = config or EmulatorConfig()
        self.root_url = root_url
        self.app = create_app(self.config)
        self.emulator.base_url = self.base_url
        self.transport = httpx.ASGITransport(app=self.app)
        self._lifespan: contextlib.AbstractAsyncContextManager[Any] | None = None

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/wp-json"

    @property
    def emulator(self) -> Emulator:
        return self.app.state.emulator

    @property
    def credentials(self) -> dict[str, Any]:
        return self.emulator.credentials(self.base_url)

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """An async client rooted at `base_url` (no credentials attached)."""
        return httpx.AsyncClient(transport=self.transport, base_url=self.base_url, **kwargs)

    async def __aenter__(self) -> InProcessEmulator:
        self._lifespan = self.app.router.lifespan_context(self.app)
        await self._lifespan.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._lifespan is not None:
            await self._lifespan.__aexit__(exc_type, exc, tb)
            self._lifespan = None
        self.close()

    def close(self) -> None:
        self.emulator.state.close()
