"""Reading the feed as bytes, a chunk at a time: from its URL (bearer key, TLS verified) or from a file.

The whole document (about 160 MB) is never held: the parser pulls chunks through `FeedBody.read()`. Every failure
is a `FeedError` of one line naming the setting to look at; a download that ends early is one too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Protocol

import httpx

from vulnfeed.settings import FeedSettings

CHUNK = 1 << 16


class FeedError(Exception):
    """The feed could not be read; `retry_after` is the moment the server asked to wait until (a 429)."""

    def __init__(self, message: str, retry_after: datetime | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FeedBody(Protocol):
    def read(self, size: int = -1) -> bytes: ...


class _HttpBody:
    """The response's bytes as a file the parser reads; a broken connection becomes a FeedError."""

    def __init__(self, response: httpx.Response, where: str) -> None:
        self._chunks = response.iter_bytes(CHUNK)
        self._buffer = b""
        self._where = where
        self.received = 0

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            try:
                chunk = next(self._chunks, None)
            except httpx.HTTPError as error:
                raise FeedError(f"the download of FLEET_VULN_FEED ({self._where}) was cut off after "
                                f"{self.received:,} bytes: {type(error).__name__}") from None
            if chunk is None:
                break
            self.received += len(chunk)
            self._buffer += chunk
        data, self._buffer = (self._buffer, b"") if size < 0 else (self._buffer[:size], self._buffer[size:])
        return data


def retry_after(value: str | None, now: datetime) -> datetime:
    """The moment a 429's `Retry-After` (seconds or an HTTP date) points to; an hour when it says nothing usable."""
    if value:
        value = value.strip()
        if value.isdigit():
            return now + timedelta(seconds=int(value))
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            moment = None
        if moment is not None:
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return now + timedelta(hours=1)


def _refusal(response: httpx.Response, where: str, now: datetime) -> FeedError:
    status = response.status_code
    if status in (401, 403):
        return FeedError(f"the feed at FLEET_VULN_FEED ({where}) refused FLEET_VULN_FEED_KEY (HTTP {status}): "
                         "check the key (a free Wordfence Intelligence API key)")
    if status == 410:
        return FeedError(f"the feed at FLEET_VULN_FEED ({where}) is gone (HTTP 410): that feed was retired; "
                         "set FLEET_VULN_FEED to the v3 feed")
    if status == 429:
        until = retry_after(response.headers.get("Retry-After"), now)
        return FeedError(f"the feed at FLEET_VULN_FEED ({where}) is rate limited (HTTP 429): not asked again "
                         f"before {until:%Y-%m-%d %H:%M} UTC (its Retry-After)", retry_after=until)
    return FeedError(f"the feed at FLEET_VULN_FEED ({where}) answered HTTP {status}")


@contextmanager
def open_feed(settings: FeedSettings, *, transport: httpx.BaseTransport | None = None) -> Iterator[FeedBody]:
    """The feed's body, to read once; raises FeedError (one line) when it cannot be had."""
    if not settings.is_url:
        path = settings.feed_path
        try:
            file = path.open("rb")
        except OSError as error:
            raise FeedError(f"FLEET_VULN_FEED ({path}) cannot be read: {error.strerror or error}") from None
        with file:
            yield file
        return
    where = settings.source
    headers = {"Accept": "application/json", "User-Agent": "fleet-maintenance"}
    if settings.vuln_feed_key is not None:
        headers["Authorization"] = f"Bearer {settings.vuln_feed_key.get_secret_value()}"
    timeout = httpx.Timeout(settings.vuln_timeout, connect=10.0)
    try:
        with httpx.Client(timeout=timeout, verify=True, transport=transport, follow_redirects=True) as client, \
                client.stream("GET", settings.vuln_feed, headers=headers) as response:
            if response.status_code != 200:
                raise _refusal(response, where, datetime.now(UTC))
            yield _HttpBody(response, where)
    except httpx.HTTPError as error:
        raise FeedError(f"the feed at FLEET_VULN_FEED ({where}) could not be reached: "
                        f"{type(error).__name__}") from None
