"""Everything that shapes one emulator run, validated once at start-up."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from emulator.capacity import (
    DEFAULT_GATEWAY_TIMEOUT,
    DEFAULT_SLOW_SITE_FACTOR,
    DEFAULT_SLOW_SITE_RATE,
    DEFAULT_WORK_SECONDS,
)

EXTENSION_MODULES = ("ssl-monitor", "domain-monitor", "lighthouse", "pro-reports", "time-tracker")
CORE_MODULES = ("cost-tracker", "logs")
ALL_MODULES = CORE_MODULES + EXTENSION_MODULES


class EmulatorConfig(BaseModel):
    """One dashboard: its namespace (`mainwp` as the product spells it, `svc` as the spec does), fleet and knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: Literal["svc", "mainwp"] = "mainwp"
    sites: int = Field(50, ge=0, le=100_000)
    seed: int = 0
    db: Path | None = None
    credentials_file: Path | None = Field(
        None, description="the credentials file of an earlier run: on a restart with `db`, its still valid "
        "bootstrap credentials are kept (the database holds only hashes); otherwise fresh ones are issued")
    time_scale: float = Field(1.0, gt=0)
    faults: str = "none"
    workers: int = Field(8, ge=1, le=1024, description="PHP workers: each request holds one from arrival to answer")
    max_body_bytes: int = Field(1024 * 1024, ge=0, description="nginx's client_max_body_size; 0 = no limit")
    gateway_timeout: float = Field(DEFAULT_GATEWAY_TIMEOUT, ge=0, description="modelled seconds; 0 = none")
    slow_site_rate: float = Field(DEFAULT_SLOW_SITE_RATE, ge=0, le=1, description="share of slow children")
    slow_site_factor: float = Field(DEFAULT_SLOW_SITE_FACTOR, ge=1, description="how much slower they are")
    work_seconds: dict[str, float] = Field(default_factory=dict)
    modules: frozenset[str] = frozenset(ALL_MODULES)
    abilities_accept_bearer: bool = True
    admin_token: SecretStr = Field(default_factory=lambda: SecretStr(secrets.token_hex(16)))

    @field_validator("modules")
    @classmethod
    def _known_modules(cls, modules: frozenset[str]) -> frozenset[str]:
        unknown = set(modules) - set(ALL_MODULES)
        if unknown:
            raise ValueError(f"unknown modules {sorted(unknown)}; known: {', '.join(ALL_MODULES)}")
        return modules

    @field_validator("work_seconds")
    @classmethod
    def _known_operations(cls, work_seconds: dict[str, float]) -> dict[str, float]:
        unknown = set(work_seconds) - set(DEFAULT_WORK_SECONDS)
        if unknown:
            raise ValueError(f"unknown operations {sorted(unknown)}; known: {', '.join(DEFAULT_WORK_SECONDS)}")
        negative = sorted(op for op, seconds in work_seconds.items() if seconds < 0)
        if negative:
            raise ValueError(f"work seconds must not be negative: {', '.join(negative)}")
        return work_seconds

    def previous_credentials(self) -> dict[str, Any] | None:
        """The earlier run's credentials file, when there is a readable one."""
        if self.credentials_file is None:
            return None
        try:
            data = json.loads(self.credentials_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    @property
    def ns(self) -> str:
        return self.namespace

    def name(self, suffix: str) -> str:
        """`name("rest_batch_items_limit")` -> `svc_rest_batch_items_limit` (or `mainwp_...`)."""
        return f"{self.namespace}_{suffix}"
