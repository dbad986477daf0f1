"""One HTTP client for the tests' own calls to the local servers they start (emulators, Prefect servers).

Every new httpx client loads Mozilla's CA bundle (17 ms of CPU), even for plain HTTP on localhost: a client per
call cost about a tenth of the test processes' CPU (a check after every test, polls once a second).

None keeps a connection idle: the local servers close one after 5 s idle (uvicorn's keep-alive), and a request sent
on it as it closes is reset ("Connection reset by peer": the generated nights failed so under a loaded `make test`).
A new connection per request costs about 0.1 ms on localhost."""

from __future__ import annotations

from typing import Any

import httpx

NO_IDLE_CONNECTIONS = httpx.Limits(max_keepalive_connections=0)
LOCAL_HTTP = httpx.Client(timeout=30, limits=NO_IDLE_CONNECTIONS)


def local_client(**options: Any) -> httpx.Client:
    """A client of one local server (`base_url`, `headers`, ...), with `LOCAL_HTTP`'s connections."""
    return httpx.Client(timeout=30, limits=NO_IDLE_CONNECTIONS, **options)
