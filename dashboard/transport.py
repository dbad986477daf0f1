"""The one HTTP client underneath: credentials per interface, timeouts, TLS, retries and error mapping.

Retry rules (the only place that retries):
- a request that never left (connect error, connect or pool timeout) and HTTP 429 are retried for every
  method: the dashboard did nothing;
- idempotent calls (GET, idempotent abilities, writes the caller marks idempotent) also retry 5xx answers
  that are not one of the dashboard's fixed error codes; reads also retry read timeouts and dropped
  connections; a write whose 5xx carries the dashboard's own error code got its answer (the request ran and
  said why it failed, e.g. an ability callback's exception) and is not sent again, idempotent or not;
- a write that got no answer (read timeout, dropped connection) or a gateway's 504, and a non-idempotent
  write's 5xx of that kind, raise `OutcomeUnknown` at once: the dashboard may still be working on it, so it
  is never repeated blindly.
Waits grow exponentially with jitter up to `retry_cap`, and honour `Retry-After`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx
from pydantic_core import from_json
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from dashboard.errors import (
    ConfigurationError,
    DashboardError,
    InvalidResponse,
    OutcomeUnknown,
    RateLimited,
    ServerError,
    TransportError,
    bare_code,
    error_from_response,
    is_deterministic,
)
from dashboard.settings import DashboardSettings
from dashboard.wire import AiohttpWire

log = logging.getLogger("dashboard")

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_READS = ("GET", "HEAD", "OPTIONS")
_REDACTED = "<redacted>"
# An idle connection is kept 1 s at most, well inside a web server's keep-alive (Apache's and uvicorn's default 5 s,
# shortened to 2 s by some hosts). Kept as long as the server keeps it (httpx's and aiohttp's 5 s), the server can
# close it just as the next request goes out on it, and a write sent so is lost: "sent but no answer".
IDLE_CONNECTION_SECONDS = 1.0


@dataclass(frozen=True)
class Credentials:
    """How one interface authenticates: headers, HTTP Basic, or (legacy v1 only) query parameters."""

    headers: dict[str, str] = field(default_factory=dict)
    basic: tuple[str, str] | None = None
    params: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # never show the values
        return "Credentials(<redacted>)"


@dataclass
class Answer:
    status: int
    body: Any
    headers: httpx.Headers
    method: str
    path: str
    elapsed: float = 0.0  # seconds from sending to the answer, not counting the wait for a free slot


class SecretRedactor(logging.Filter):
    """Blanks secret values in records of the HTTP libraries (httpx logs full URLs, v1 puts keys there)."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__("dashboard-secrets")
        self._needles = sorted({s for secret in secrets for s in (secret, quote(secret, safe=""))}, key=len,
                               reverse=True)

    def redact(self, text: str) -> str:
        for needle in self._needles:
            text = text.replace(needle, _REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._needles:
            message = record.getMessage()
            redacted = self.redact(message)
            if redacted != message:
                record.msg, record.args = redacted, ()
        return True


class Transport:
    """One pooled `httpx.AsyncClient` for every interface of one dashboard."""

    LOGGERS = ("httpx", "httpcore", "dashboard")

    def __init__(self, settings: DashboardSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=settings.connect_timeout,
                read=settings.read_timeout,
                write=settings.read_timeout,
                pool=settings.connect_timeout,
            ),
            limits=self._limits(settings),
            verify=settings.verify_tls,
            transport=transport or self._engine(settings),
            follow_redirects=False,
            headers={"Accept": "application/json", "User-Agent": "fleet-maintenance-dashboard-client"},
        )
        self._in_flight = asyncio.Semaphore(settings.max_connections)
        self._redactor = SecretRedactor(settings.secrets())
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self._redactor)

    def __repr__(self) -> str:
        return f"Transport(base_url={self.settings.base_url!r})"

    @staticmethod
    def _engine(settings: DashboardSettings) -> httpx.AsyncBaseTransport | None:
        """The engine under httpx; None: httpx's own."""
        if settings.http_engine == "httpx":
            return None
        return AiohttpWire(verify=settings.verify_tls, limits=Transport._limits(settings))

    @staticmethod
    def _limits(settings: DashboardSettings) -> httpx.Limits:
        return httpx.Limits(max_connections=settings.max_connections, keepalive_expiry=IDLE_CONNECTION_SECONDS)

    async def aclose(self) -> None:
        await self._http.aclose()
        for name in self.LOGGERS:
            logging.getLogger(name).removeFilter(self._redactor)

    def redact(self, text: str) -> str:
        return self._redactor.redact(text)

    async def request(
        self,
        method: str,
        url: str,
        *,
        credentials: Credentials,
        idempotent: bool | None = None,
        params: dict[str, Any] | list[tuple[str, Any]] | None = None,
        json: Any = None,
        form: dict[str, Any] | None = None,
    ) -> Answer:
        """Send one call, retrying what is safe, and return the answer or raise its typed error."""
        method = method.upper()
        safe = method in _READS if idempotent is None else idempotent
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(_retryable),
            before_sleep=self._log_retry,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._send_once(method, url, credentials, safe, params, json, form)
        raise AssertionError("unreachable")  # pragma: no cover - tenacity either returns or reraises

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            return min(exc.retry_after, self.settings.retry_cap)
        backoff = wait_exponential_jitter(initial=self.settings.retry_initial, max=self.settings.retry_cap,
                                          jitter=self.settings.retry_initial)
        return backoff(state)

    @staticmethod
    def _log_retry(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning("retrying after %s (attempt %d, waiting %.2fs)", exc, state.attempt_number, wait)

    async def _send_once(
        self,
        method: str,
        url: str,
        credentials: Credentials,
        safe: bool,
        params: dict[str, Any] | list[tuple[str, Any]] | None,
        json: Any,
        form: dict[str, Any] | None,
    ) -> Answer:
        path = unquote(urlsplit(url).path) or "/"  # as httpx.URL(url).path says it, without its parse per call
        query: list[tuple[str, Any]] = list(params.items() if isinstance(params, dict) else params or [])
        query += list(credentials.params.items())
        auth = httpx.BasicAuth(*credentials.basic) if credentials.basic else None
        try:
            async with self._in_flight:  # the rest wait here, without httpx's pool timeout
                sent = time.monotonic()
                response = await self._http.request(
                    method, url, params=query or None, json=json, data=form, headers=credentials.headers, auth=auth
                )
                elapsed = time.monotonic() - sent
        except _NOT_SENT as exc:
            raise TransportError(self._describe(exc), code="connect", method=method, path=path) from None
        except (httpx.RequestError, OSError) as exc:  # OSError: an in-process (ASGI) server that dropped us
            if method in _READS:
                raise TransportError(self._describe(exc), code="no_answer", method=method, path=path) from None
            raise OutcomeUnknown(
                f"sent but no answer ({self._describe(exc)}); the write may or may not have been applied: "
                "re-read the state before trying again",
                code="no_answer",
                method=method,
                path=path,
            ) from None
        if response.is_redirect:
            location = self.redact(response.headers.get("Location", "?"))
            raise ConfigurationError(
                f"the dashboard redirects to {location}; point FLEET_BASE_URL there "
                "(redirects are not followed, so credentials never travel to another address)",
                code="redirect", status=response.status_code, method=method, path=path,
            )
        body = self._body(response)
        error = error_from_response(
            response.status_code, body, method=method, path=path, retry_after=response.headers.get("Retry-After")
        )
        if error is None:
            if body is _NOT_JSON:
                raise InvalidResponse("the answer is not JSON", status=response.status_code, method=method,
                                      path=path)
            return Answer(response.status_code, body, response.headers, method, path, elapsed)
        error.elapsed = elapsed
        raise self._settle(error, safe)

    def _settle(self, error: DashboardError, safe: bool) -> DashboardError:
        """A transient 5xx stays retryable for a safe call and becomes `OutcomeUnknown` for a write; so does
        `ability_invalid_output` on a write, which the ability ran before its output failed validation, and a
        gateway's 504 on any write, even one marked idempotent: the dashboard is still working on it, and
        sending it again would only pile a second copy of the work on its workers."""
        ran_unreadable = bare_code(error.code) == "ability_invalid_output"
        lost = error.status == 504 and error.method not in _READS
        if not lost and (safe or not (_transient(error) or ran_unreadable)):
            return error
        lost_write = OutcomeUnknown(
            f"{error.message}; the write may or may not have been applied: re-read the state before trying again",
            code=error.code or "server_error",
            status=error.status,
            method=error.method,
            path=error.path,
        )
        lost_write.elapsed = error.elapsed
        return lost_write

    def _describe(self, exc: Exception) -> str:
        text = str(exc) or type(exc).__name__
        return self.redact(f"{type(exc).__name__}: {text}")

    @staticmethod
    def _body(response: httpx.Response) -> Any:
        """The JSON body, decoded by pydantic-core (about twice as fast as `json`); `json` still reads what it
        refuses (a byte-order mark, UTF-16, lone surrogates in escapes)."""
        if not response.content:
            return None
        try:
            return from_json(response.content)
        except ValueError:
            pass
        try:
            return response.json()
        except ValueError:
            if response.status_code >= 400:
                return response.text[:500]
            return _NOT_JSON


_NOT_JSON = object()


def _transient(error: BaseException) -> bool:
    """A 5xx that is a passing server fault rather than one of the dashboard's fixed error codes."""
    return type(error) is ServerError and not is_deterministic(error.code)


def _answered_write(error: DashboardError) -> bool:
    """A write's error answer that WordPress itself wrote (an error code other than its fatal-error handler's):
    the request ran to its end, so the answer is definite."""
    return (error.method not in _READS and bool(error.code)
            and bare_code(error.code) != "internal_server_error")


def _retryable(error: BaseException) -> bool:
    if isinstance(error, RateLimited | TransportError):
        return True
    return _transient(error) and not _answered_write(error)  # type: ignore[arg-type]


def require(value: Any, what: str, env: str) -> Any:
    """A setting an interface cannot work without; the error says which variable to set."""
    if not value:
        raise ConfigurationError(f"{what} is not configured: set {env}")
    return value
