"""The guard's settings (`FLEET_GUARD_*`): the fleet's private key, in the home's `.env` or a Prefect Secret block."""

from __future__ import annotations

from pydantic import Field, SecretStr

from dashboard.home import FleetSettings


class GuardSettings(FleetSettings):
    guard_key: SecretStr | None = Field(
        None, description="The fleet's Ed25519 private key for Fleet Guard (base64 of its 32-byte seed); written by "
        "`fleet guard keygen`. Never logged.")
    guard_previous_key: SecretStr | None = Field(
        None, description="The key before the last `fleet guard keygen --rotate`: sites whose guard was built "
        "before the rotation still accept only it, until the rebuilt guard is installed there.")
    guard_key_block: str | None = Field(
        None, description="A Prefect Secret block holding the keys instead ({\"key\": ..., \"previous_key\": ...}).")
    guard_timeout: float = Field(30.0, gt=0, description="Longest wait for one answer of a site's guard, seconds.")
    guard_concurrency: int = Field(4, ge=1, description="Guards asked at once by `fleet guard status`.")
