"""One HTTP client for the tests' own calls to the local servers they start (emulators, Prefect servers).

Every new httpx client loads Mozilla's CA bundle (17 ms of CPU), even for plain HTTP on localhost: a client per
call cost about a tenth of the test processes' CPU (a check after every test, polls once a second)."""

from __future__ import annotations

import httpx

LOCAL_HTTP = httpx.Client(timeout=30)
