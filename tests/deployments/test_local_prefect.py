"""The environment of a client of `prefect server start` as the estate demo, the soak and the serving tests start
it (`cli/local_prefect.py`)."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

from prefect.settings import Settings

from cli.local_prefect import LocalPrefectServer

# `prefect server start` on SQLite, on a busy machine (a full run of the suite), answered a `prefect deployment run`
# 62 s after it came, its database locked by another of its own transactions, the flow run already made
SLOWEST_ANSWER_SEEN = 62.0


def test_a_client_of_the_local_server_waits_out_its_slowest_answer_instead_of_asking_twice(tmp_path: Path) -> None:
    """A client that gives up first sends the request again (Prefect's client retries a timed-out request, a POST
    too): the fan-out's flow run was created twice, and the test read the second, which found nothing to do."""
    server = LocalPrefectServer(tmp_path / "home")
    with mock.patch.dict(os.environ, server.environment(), clear=True):
        settings = Settings()

    assert settings.api.url == server.api_url
    assert settings.api.request_timeout > SLOWEST_ANSWER_SEEN, "a client of the server gives up before it answers"
