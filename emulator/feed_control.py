"""The vulnerability feed's switches (`emulator.vulnerabilities` serves the feed), in a module of their own so that
the dashboard's services (`emulator.services`) can name them without the feed's routes."""

from __future__ import annotations

from typing import Any


class FeedControl:
    """The feed's switches: a fault for the next answers, and records published by hand."""

    def __init__(self) -> None:
        self.fault: str | None = None
        self.retry_after = 120
        self.published: list[dict[str, Any]] = []
