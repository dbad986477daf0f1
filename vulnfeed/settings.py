"""Where the vulnerability feed comes from and how often it is read again (`FLEET_VULN_*`)."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from dashboard.home import FleetSettings

PRODUCTION_FEED = "https://www.wordfence.com/api/intelligence/v3/vulnerabilities/production"


class FeedSettings(FleetSettings):
    vuln_feed: str = Field(
        PRODUCTION_FEED,
        description="The Wordfence Intelligence v3 feed: its URL (Wordfence's production feed by default, or a "
        "mirror) or a file path (offline use, tests).",
    )
    vuln_feed_key: SecretStr | None = Field(
        None, description="Wordfence Intelligence API key (free), sent as a bearer token to the feed's URL.")
    vuln_refresh: timedelta = Field(
        timedelta(hours=1), description="Read the feed again at most this often (seconds, or ISO 8601 as PT6H).")
    vuln_timeout: float = Field(120.0, gt=0, description="Longest silence of the feed's server, seconds.")

    @field_validator("vuln_feed")
    @classmethod
    def _url_or_path(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must be the feed's URL or a file path")
        parts = urlsplit(value)
        if parts.scheme in ("http", "https"):
            if "@" in parts.netloc:
                raise ValueError("must not carry credentials in the URL; put the key in FLEET_VULN_FEED_KEY")
            if not parts.netloc:
                raise ValueError("must be an http or https URL with a host, or a file path")
        return value

    @field_validator("vuln_refresh", mode="before")
    @classmethod
    def _seconds(cls, value: object) -> object:
        """A plain number is seconds (pydantic reads only ISO 8601 from text)."""
        if isinstance(value, str):
            try:
                return timedelta(seconds=float(value))
            except ValueError:
                return value
        return value

    @field_validator("vuln_refresh")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value < timedelta(0):
            raise ValueError("must not be negative (0 reads the feed on every run)")
        return value

    @property
    def is_url(self) -> bool:
        return urlsplit(self.vuln_feed).scheme in ("http", "https")

    @property
    def feed_path(self) -> Path:
        return Path(self.vuln_feed).expanduser()

    @property
    def source(self) -> str:
        """The feed as reports may name it (no key: it never travels in the URL)."""
        return self.vuln_feed

    @property
    def fingerprint(self) -> str:
        """The source and a digest of the key: a copy read with other settings is read again at once (the key
        itself is never written down)."""
        key = self.vuln_feed_key.get_secret_value() if self.vuln_feed_key else ""
        return f"{self.vuln_feed} key:{hashlib.sha256(key.encode()).hexdigest()[:16] if key else 'none'}"
