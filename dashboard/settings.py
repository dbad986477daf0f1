"""Connection settings: from `FLEET_*` environment variables or a `.env` file (pydantic-settings; where those
are: `dashboard/home.py`).

`base_url` is the dashboard's REST prefix, e.g. `https://dash.example.com/wp-json`; the REST v2 root is
`{base_url}/{namespace}/v2` and the abilities live at `{base_url}/wp-abilities/v1` unless `abilities_url`
says otherwise. Secrets are `SecretStr`: they never show in a repr, a log line or an error.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from dashboard.home import FleetSettings

Namespace = Literal["svc", "mainwp"]


def _check_url(value: str) -> str:
    value = value.strip().rstrip("/")
    parts = urlsplit(value)
    if "@" in parts.netloc:  # never echo it: the password would land in a log or a terminal
        raise ValueError("must not carry a user name or password (http://user:password@host); put the "
                         "credentials in FLEET_API_KEY and FLEET_ABILITIES_PASSWORD (the URL is not shown)")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http(s) URL such as https://dash.example.com/wp-json")
    if parts.query or parts.fragment:
        raise ValueError("must not carry a query string or fragment")
    return value


class DashboardSettings(FleetSettings):
    """Everything needed to talk to one dashboard."""

    base_url: str = Field(description="REST prefix of the dashboard, e.g. https://dash.example.com/wp-json")
    api_key: SecretStr | None = Field(None, description="REST API v2 bearer token (`<secret>==<key>`).")
    abilities_user: str | None = Field(None, description="WordPress user name for the Abilities API.")
    abilities_password: SecretStr | None = Field(None, description="That user's application password.")
    abilities_bearer: bool = Field(
        False, description="Send the REST API key to the Abilities API instead (for dashboards that take it)."
    )
    abilities_url: str | None = Field(None, description="Default: {base_url}/wp-abilities/v1.")
    namespace: Namespace | None = Field(None, description="svc or mainwp; discovered from the REST index if unset.")
    consumer_key: SecretStr | None = Field(None, description="Legacy v1 consumer key (ck_...).")
    consumer_secret: SecretStr | None = Field(None, description="Legacy v1 consumer secret (cs_...).")
    verify_tls: bool = True
    connect_timeout: float = Field(5.0, gt=0)
    read_timeout: float = Field(60.0, gt=0, description="Update calls can take a while per site.")
    max_attempts: int = Field(4, ge=1, le=10, description="Tries of an idempotent call (1 = no retry).")
    retry_initial: float = Field(0.5, gt=0, description="First wait between tries, seconds.")
    retry_cap: float = Field(30.0, gt=0, description="Longest single wait between tries, seconds.")
    max_connections: int = Field(
        20, ge=1, description="Requests in flight at once; more wait their turn (however long the calls ahead take)."
    )
    http_engine: Literal["aiohttp", "httpx"] = Field(
        "aiohttp", description="What carries httpx's requests: aiohttp's engine (about half the CPU per request) or "
        "httpx's own; the client's errors are the same over both."
    )

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        return _check_url(value)

    @field_validator("api_key")
    @classmethod
    def _looks_like_a_key(cls, value: SecretStr | None) -> SecretStr | None:
        token = value.get_secret_value().strip() if value is not None else ""
        if value is None or not token:
            return None
        secret, separator, key = token.partition("==")
        if not (secret and separator and key) or any(c.isspace() for c in token):
            raise ValueError("is not a MainWP REST API key: a key reads <secret>==<key> (two long hex strings joined "
                             "by ==), as MainWP > REST API shows it once, when the key is created")
        return SecretStr(token)

    @field_validator("abilities_url")
    @classmethod
    def _abilities_url(cls, value: str | None) -> str | None:
        return _check_url(value) if value else None

    @field_validator("abilities_user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        return value.strip() or None if value else None

    @model_validator(mode="after")
    def _pairs(self) -> DashboardSettings:
        if bool(self.abilities_user) != bool(self.abilities_password):
            raise ValueError("FLEET_ABILITIES_USER and FLEET_ABILITIES_PASSWORD (a block's abilities_user and "
                             "abilities_password) must be given together")
        if bool(self.consumer_key) != bool(self.consumer_secret):
            raise ValueError("FLEET_CONSUMER_KEY and FLEET_CONSUMER_SECRET (a block's consumer_key and "
                             "consumer_secret) must be given together")
        return self

    @property
    def resolved_abilities_url(self) -> str:
        return self.abilities_url or f"{self.base_url}/wp-abilities/v1"

    def secrets(self) -> list[str]:
        """Every secret value, so a log filter can blank them wherever they might surface."""
        values = (self.api_key, self.abilities_password, self.consumer_key, self.consumer_secret)
        return [v.get_secret_value() for v in values if v is not None and v.get_secret_value()]
