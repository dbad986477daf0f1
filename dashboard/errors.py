"""One exception hierarchy for everything the dashboard can answer, and the one place that maps answers to it.

Every error names the call that failed (method and path, never the query string, which may carry
credentials), the dashboard's error code and the HTTP status, so a log line says what went wrong where.
"""

from __future__ import annotations

import re
from typing import Any

# Codes are compared without their namespace prefix (`svc_site_not_found` and `mainwp_site_not_found`
# are the same error); `ns_` in the tables below stands for either.
_NAMESPACE_PREFIX = re.compile(r"^(svc|mainwp)_")


class DashboardError(Exception):
    """Base of every error raised by the client."""

    elapsed: float | None = None  # seconds from sending to the error answer (a 504's says how long the gateway waits)

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        method: str | None = None,
        path: str | None = None,
    ) -> None:
        self.message = message
        self.code = code
        self.status = status
        self.method = method
        self.path = path
        super().__init__(message)

    @property
    def call(self) -> str:
        return f"{self.method} {self.path}" if self.method and self.path else (self.path or "")

    def __str__(self) -> str:
        details = ", ".join(
            part for part in (self.code, f"HTTP {self.status}" if self.status else None) if part
        )
        where = f"{self.call}: " if self.call else ""
        return f"{where}{self.message}" + (f" [{details}]" if details else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class ConfigurationError(DashboardError):
    """The connection settings are incomplete or invalid."""


class TransportError(DashboardError):
    """The dashboard could not be reached (connection refused, DNS, TLS, timeout) after all retries."""


class OutcomeUnknown(DashboardError):
    """A non-idempotent write was sent but no answer came back: re-read the state before trying again."""


class InvalidResponse(DashboardError):
    """The dashboard answered with something that is not the documented shape (not JSON, wrong types)."""


class AuthenticationError(DashboardError):
    """The credentials were missing, wrong, disabled or unknown (the dashboard answers all of these 401)."""


class PermissionDenied(DashboardError):
    """The credentials are valid but do not allow this call (a read-only key writing, a user without
    `manage_options`)."""


class NotFound(DashboardError):
    """What the call named does not exist; `what` says which thing."""

    what = "resource"


class RouteNotFound(NotFound):
    what = "route"


class SiteNotFound(NotFound):
    what = "site"


class ClientNotFound(NotFound):
    what = "client"


class TagNotFound(NotFound):
    what = "tag"


class MonitorNotFound(NotFound):
    what = "monitor"


class ApiKeyNotFound(NotFound):
    what = "API key"


class AbilityNotFound(NotFound):
    what = "ability"


class JobNotFound(NotFound):
    """The batch job is unknown or expired (jobs are kept 24 hours)."""

    what = "batch job"


class MethodNotAllowed(DashboardError):
    """The HTTP method does not fit the route or ability."""


class InvalidInput(DashboardError):
    """The dashboard rejected the input (schema, enum, pattern, missing parameter)."""


class ConfirmationRequired(InvalidInput):
    """A destructive call needs `confirm: true` (or `dry_run: true` for a preview)."""


class SiteOffline(DashboardError):
    """The child site is unreachable or known to be offline."""


class ChildOutdated(InvalidInput):
    """The dashboard refuses the site: its sync record of the MainWP Child is older than 4.0.0. On MainWP that record
    is 0 after any failed sync (the site list still shows the real version) until the site is reconnected."""


class ModuleUnavailable(DashboardError):
    """The dashboard module this call needs (Cost Tracker, Logs) is not active."""


class RateLimited(DashboardError):
    """HTTP 429; `retry_after` is the server's hint in seconds, when it gave one."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ServerError(DashboardError):
    """HTTP 5xx that is not one of the dashboard's deterministic error codes."""


class ActionFailed(DashboardError):
    """HTTP 200 with `success: 0`: the dashboard refused or could not do the action."""


class NothingToUpdate(ActionFailed):
    """A per-site update route had nothing to update ("No Plugins to update.")."""


class JobError(DashboardError):
    """Base of the errors of waiting on a batch job; `last_status` is the last status seen, if any."""

    def __init__(self, message: str, *, job_id: str, last_status: Any = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.job_id = job_id
        self.last_status = last_status


class JobTimedOut(JobError):
    """The deadline passed before the job finished."""


class JobStalled(JobError):
    """The job started but made no progress for longer than the stall limit."""


class JobNeverStarted(JobStalled):
    """The job stayed queued far longer than the dashboard's first cron run: its WP-Cron is not firing."""


class JobExpired(JobError, JobNotFound):
    """The job was seen before and has since disappeared (expired or purged)."""


# Codes without the namespace prefix -> error class. Codes win over the HTTP status: the real dashboard
# answers an unknown site with 403 from the abilities and 500 from REST, an unknown key with 500.
_BY_CODE: dict[str, type[DashboardError]] = {
    "site_not_found": SiteNotFound,
    "rest_invalid_site_id": SiteNotFound,
    "rest_invalid_site_data": SiteNotFound,
    "client_not_found": ClientNotFound,
    "rest_invalid_client_id": ClientNotFound,
    "rest_invalid_client_data": ClientNotFound,
    "tag_not_found": TagNotFound,
    "rest_invalid_tag_id": TagNotFound,
    "rest_invalid_costs_id": NotFound,
    "job_not_found": JobNotFound,
    "api_key_not_found": ApiKeyNotFound,
    "renew_connection_job_not_found": NotFound,
    "rest_ability_not_found": AbilityNotFound,
    "rest_no_route": RouteNotFound,
    "no_updates": NotFound,
    "rest_ability_invalid_method": MethodNotAllowed,
    "rest_method_not_allowed": PermissionDenied,
    "confirmation_required": ConfirmationRequired,
    "ability_invalid_input": InvalidInput,
    "ability_missing_input_schema": InvalidInput,
    "invalid_input": InvalidInput,
    "invalid_url": InvalidInput,
    "invalid_job_id": InvalidInput,
    "rest_invalid_param": InvalidInput,
    "rest_missing_callback_param": InvalidInput,
    "rest_invalid_param_value": InvalidInput,
    "empty_body": InvalidInput,
    "invalid_content_type": InvalidInput,
    "already_exists": InvalidInput,
    "site_already_exists": InvalidInput,
    "child_outdated": ChildOutdated,
    "rest_request_entity_too_large": InvalidInput,
    "rest_invalid_plugins_slugs": InvalidInput,
    "rest_invalid_themes_slugs": InvalidInput,
    "rest_activate_plugins_action": ActionFailed,
    "rest_deactivate_plugins_action": ActionFailed,
    "activation_failed": ActionFailed,
    "deactivation_failed": ActionFailed,
    "ability_invalid_permissions": PermissionDenied,
    "permission_denied": PermissionDenied,
    "access_denied": PermissionDenied,
    "rest_ability_cannot_execute": PermissionDenied,
    "site_offline": SiteOffline,
    "connection_failed": SiteOffline,
    "reconnect_failed": SiteOffline,
    "check_failed": SiteOffline,
    "module_not_available": ModuleUnavailable,
    "incorrect_password": AuthenticationError,
    "invalid_username": AuthenticationError,
    "invalid_email": AuthenticationError,
}

# Codes whose answer will be the same on a second try: never retried even when the status is 5xx.
_DETERMINISTIC_SERVER_CODES = frozenset(
    code for code, cls in _BY_CODE.items() if cls not in (SiteOffline, ServerError)
) | {"ability_invalid_output", "update_failed", "update_exception", "invalid_type", "deletion_failed"}


def bare_code(code: str | None) -> str:
    """The error code without its namespace prefix."""
    return _NAMESPACE_PREFIX.sub("", code or "")


def is_deterministic(code: str | None) -> bool:
    """True when a 5xx with this code is a fixed answer, not a passing server fault."""
    return bool(code) and bare_code(code) in _DETERMINISTIC_SERVER_CODES


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (only the delta-seconds form is used by WordPress hosts)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _class_for(code: str, status: int, message: str) -> type[DashboardError]:
    if status == 401:
        # Every auth failure is 401; a read-only key writing gets 401 "does not have write permissions",
        # which is a permission problem, not a credential problem.
        lowered = message.lower()
        if "does not have" in lowered or bare_code(code) == "rest_method_not_allowed":
            return PermissionDenied
        return AuthenticationError
    bare = bare_code(code)
    if bare in _BY_CODE:
        return _BY_CODE[bare]
    if bare.startswith("rest_authentication"):
        return AuthenticationError
    by_status: dict[int, type[DashboardError]] = {
        403: PermissionDenied, 404: NotFound, 405: MethodNotAllowed, 429: RateLimited, 501: ModuleUnavailable,
    }
    if status in by_status:
        return by_status[status]
    if status in (400, 409, 413, 422):
        return InvalidInput
    if status >= 500:
        return ServerError
    return DashboardError


# The exceptions `MainWP_Connect::fetch_url` throws when the child gave no MainWP answer: NOMAINWP (a page without
# `<mainwp>`, such as the critical-error page of a child dead at load), HTTPERROR (no HTTP answer at all). However a
# handler passes one on (an ability callback's `ability_callback_exception` quoting it, a REST route's error with the
# word alone), the child did not answer: the site is unreachable, whatever the code says.
_CHILD_SILENT = re.compile(r"(?:^|: )(NOMAINWP|HTTPERROR)$")


def child_did_not_answer(message: str | None) -> bool:
    """The dashboard's message says that the child site gave it no MainWP answer (NOMAINWP, HTTPERROR)."""
    return bool(_CHILD_SILENT.search((message or "").strip()))


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


def body_excerpt(body: str, limit: int = 200) -> str:
    """A non-JSON error body on one line: a gateway's or host's HTML page by its title, else its text."""
    title = _TITLE.search(body)
    text = title.group(1) if title else _TAG.sub(" ", body)
    return " ".join(text.split())[:limit]


def error_from_response(
    status: int,
    body: Any,
    *,
    method: str,
    path: str,
    retry_after: str | None = None,
) -> DashboardError | None:
    """The typed error an answer stands for, or None when the answer is a success.

    Understands the WordPress error shape `{code, message, data}`, the legacy v1 `{"ERROR": ...}` shape,
    and the `{success: 0, error|message}` failures the dashboard sends with HTTP 200.
    """
    where = {"method": method, "path": path}
    if 200 <= status < 300:
        if isinstance(body, dict) and body.get("success") in (0, False, "0"):
            message = str(body.get("error") or body.get("message") or "the dashboard reported a failure")
            lowered = message.lower()
            if "not found" in lowered:
                cls: type[DashboardError] = MonitorNotFound if "monitor" in lowered else NotFound
            elif lowered.startswith("no ") and "to update" in lowered:
                cls = NothingToUpdate
            else:
                cls = ActionFailed
            return cls(message, code="success_0", status=status, **where)
        return None
    code: str | None = None
    message = f"HTTP {status}"
    if isinstance(body, dict):
        if isinstance(body.get("code"), str):
            code = body["code"]
        raw_message = body.get("message") or body.get("ERROR") or body.get("error")
        if raw_message:
            message = str(raw_message)
    elif isinstance(body, str) and body.strip():
        message = f"HTTP {status}: {body_excerpt(body)}"
    if status == 401 and code is None and isinstance(body, dict) and "ERROR" in body:
        code = "legacy_v1_authentication"
    cls = SiteOffline if child_did_not_answer(message) else _class_for(code or "", status, message)
    if cls is RateLimited or status == 429:
        return RateLimited(message, code=code, status=status, retry_after=parse_retry_after(retry_after), **where)
    return cls(message, code=code, status=status, **where)
