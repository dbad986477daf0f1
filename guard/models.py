"""The guard's answers, read as untrusted input: tolerant of extra fields, strict on what the night relies on."""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator

from guard.signing import PROTOCOL

GUARD_VERSION = "1.0.0"  # the guard this fleet builds (guard/plugin/fleet-guard/fleet-guard.php's Version)
OLDEST_USABLE = "1.0.0"  # an older guard answers, but the night does not count on it


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    guard: str = ""
    version: str = ""
    protocol: int = 0
    nonce: str = ""
    action: str = ""
    ok: bool = False
    error: str | None = None


class KeptVersion(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: str
    bytes: int = 0
    at: int = 0


class InstalledPlugin(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: str = ""
    active: bool = False


class GuardStatus(Answer):
    mode: str = ""
    problems: list[str] = Field(default_factory=list)
    paused: list[str] = Field(default_factory=list)
    kept: dict[str, list[KeptVersion]] = Field(default_factory=dict)
    free_bytes: int | None = None
    keep_bytes: int | None = None
    plugins: dict[str, InstalledPlugin] = Field(default_factory=dict)
    themes: dict[str, str] = Field(default_factory=dict)
    theme: str = ""
    key: str = Field("current", description="Which of the fleet's keys it answered: current or previous.")

    @field_validator("kept", "plugins", "themes", mode="before")
    @classmethod
    def _empty_map(cls, value: object) -> object:
        """PHP writes an empty map as []."""
        return {} if value == [] else value

    @property
    def unusable(self) -> str | None:
        """Why the night must not count on this guard, or None."""
        if self.protocol != PROTOCOL:
            return f"guard protocol {self.protocol}, not {PROTOCOL}: install the guard `fleet guard build` makes"
        if _older(self.version, OLDEST_USABLE):
            return (f"guard {self.version or '?'} is older than {OLDEST_USABLE}: install the one `fleet guard build` "
                    "makes")
        if self.mode != "must-use":
            return "its must-use loader is missing: " + ("; ".join(self.problems) or "reactivate the guard")
        return None

    def kept_versions(self, type_: str, slug: str) -> list[str]:
        return [kept.version for kept in self.kept.get(f"{type_}:{slug}", [])]


class ProbeAnswer(Answer):
    status: int = 0
    up: bool = False
    fatal: dict[str, Any] | None = None
    critical: bool = False
    left_out: list[str] = Field(default_factory=list)
    theme_left_out: bool = False

    @property
    def said(self) -> str:
        """How the page came out, in a few words."""
        if self.up:
            return f"HTTP {self.status}"
        if self.fatal:
            where = f" in {self.fatal.get('file')}:{self.fatal.get('line')}" if self.fatal.get("file") else ""
            return f"HTTP {self.status}, fatal error{where}: {str(self.fatal.get('message', ''))[:200]}"
        return f"HTTP {self.status}" + (", WordPress's critical-error page" if self.critical else "")


class PauseAnswer(Answer):
    paused: list[str] = Field(default_factory=list)


class RestoreAnswer(Answer):
    restored: dict[str, str] | None = None
    installed: str = ""


def _older(version: str, than: str) -> bool:
    try:
        return Version(version) < Version(than)
    except InvalidVersion:
        return True
