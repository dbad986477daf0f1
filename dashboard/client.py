"""`DashboardClient`: the typed async client every task uses to talk to a dashboard.

    async with DashboardClient.from_env() as dashboard:
        sites = await dashboard.list_sites()
        start = await dashboard.run_updates([s.id for s in sites], ["plugins"], ["akismet/akismet.php"])
        if start.queued:
            status = await dashboard.wait_for_job(start.job_id, deadline=3600)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import ValidationError

from dashboard.abilities import AbilityMethods
from dashboard.errors import ConfigurationError
from dashboard.home import settings_problem
from dashboard.jobs import ProgressCallback, WaitPolicy, wait_for_job
from dashboard.models import JobStatus
from dashboard.rest import RestMethods
from dashboard.settings import DashboardSettings

if TYPE_CHECKING:
    from dashboard.block import DashboardConnection

KeyChoice = Literal["read_write", "read", "disabled"]


class DashboardClient(RestMethods, AbilityMethods):
    """REST API v2, Abilities API and legacy v1 of one dashboard over one pooled httpx client.

    Pass `transport` (e.g. `httpx.ASGITransport(app)`) to talk to an in-process server.
    """

    def __init__(self, settings: DashboardSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(settings, transport=transport)

    async def __aenter__(self) -> DashboardClient:
        return self

    @classmethod
    def from_env(cls, **overrides: Any) -> DashboardClient:
        """From `FLEET_*` environment variables and `.env`; a missing or bad one is a `ConfigurationError`."""
        try:
            return cls(DashboardSettings(**overrides))
        except ValueError as exc:
            raise ConfigurationError(f"invalid dashboard settings: {_settings_problem(exc)}") from None

    @classmethod
    def from_block(cls, block: DashboardConnection, **overrides: Any) -> DashboardClient:
        try:
            return cls(block.settings(**overrides))
        except ValueError as exc:  # pydantic's message would quote the values: a URL's password among them
            raise ConfigurationError(_settings_problem(exc, "the Dashboard Connection block")) from None

    @classmethod
    def from_credentials(
        cls,
        credentials: Mapping[str, Any],
        *,
        key: KeyChoice = "read_write",
        transport: httpx.AsyncBaseTransport | None = None,
        **overrides: Any,
    ) -> DashboardClient:
        """From an emulator's credentials dict (`base_url`, `namespace`, `abilities_url`, `api_keys`,
        `application_password`, `v1`)."""
        try:
            password = credentials.get("application_password") or {}
            v1 = credentials.get("v1") or {}
            values: dict[str, Any] = {
                "base_url": credentials["base_url"],
                "namespace": credentials.get("namespace"),
                "abilities_url": credentials.get("abilities_url"),
                "api_key": (credentials.get("api_keys") or {}).get(key),
                "abilities_user": password.get("username"),
                "abilities_password": password.get("password"),
                "consumer_key": v1.get("consumer_key"),
                "consumer_secret": v1.get("consumer_secret"),
                **overrides,
            }
            settings = DashboardSettings.model_validate(values)
        except (KeyError, ValueError) as exc:
            raise ConfigurationError(_settings_problem(exc, "the emulator's credentials")) from None
        return cls(settings, transport=transport)

    async def wait_for_job(
        self,
        job_id: str,
        *,
        deadline: float | None = None,
        poll_interval: float | None = None,
        stall_after: float | None = None,
        never_started_after: float | None = None,
        on_progress: ProgressCallback | None = None,
        policy: WaitPolicy | None = None,
    ) -> JobStatus:
        """Poll a batch job until it is completed or failed; see `dashboard.jobs` for the typed endings."""
        base = policy or WaitPolicy()
        given = {"deadline": deadline, "poll_interval": poll_interval, "stall_after": stall_after,
                 "never_started_after": never_started_after}
        fields = {**base.__dict__, **{k: v for k, v in given.items() if v is not None}}
        if poll_interval is not None:  # scale the interval's ceiling with it
            fields["max_poll_interval"] = max(base.max_poll_interval * poll_interval / base.poll_interval,
                                              poll_interval)
        return await wait_for_job(lambda: self.job_status(job_id), job_id, WaitPolicy(**fields),
                                  on_progress=on_progress)


def _settings_problem(exc: Exception, block: str | None = None) -> str:
    """A one-line description of bad settings that names the variable or field, never its value."""
    if isinstance(exc, ValidationError):
        return settings_problem(exc, block)
    if isinstance(exc, KeyError):
        return f"dashboard credentials lack {exc.args[0]!r}"
    return f"invalid dashboard settings: {type(exc).__name__}"
