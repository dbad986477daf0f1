"""The Prefect block that stores a dashboard connection (secrets encrypted by Prefect, `SecretStr` here)."""

from __future__ import annotations

from prefect.blocks.core import Block
from pydantic import Field, SecretStr

from dashboard.settings import DashboardSettings, Namespace


class DashboardConnection(Block):
    """Where a dashboard is and how to authenticate to its REST API v2 and Abilities API."""

    _block_type_name = "Dashboard Connection"
    _description = "Base URL and credentials of a MainWP-style dashboard."

    base_url: str = Field(description="REST prefix, e.g. https://dash.example.com/wp-json")
    api_key: SecretStr | None = Field(None, description="REST API v2 bearer token.")
    abilities_user: str | None = Field(None, description="WordPress user for the Abilities API.")
    abilities_password: SecretStr | None = Field(None, description="That user's application password.")
    namespace: Namespace | None = Field(None, description="svc or mainwp; discovered when empty.")
    verify_tls: bool = True

    @classmethod
    def from_settings(cls, settings: DashboardSettings) -> DashboardConnection:
        """The block that stands for these settings (what `fleet blocks save` stores)."""
        return cls(
            base_url=settings.base_url,
            api_key=settings.api_key,
            abilities_user=settings.abilities_user,
            abilities_password=settings.abilities_password,
            namespace=settings.namespace,
            verify_tls=settings.verify_tls,
        )

    def settings(self, **overrides: object) -> DashboardSettings:
        """The client settings this block stands for (environment variables do not override a block)."""
        values = {
            "base_url": self.base_url,
            "api_key": self.api_key,
            "abilities_user": self.abilities_user,
            "abilities_password": self.abilities_password,
            "namespace": self.namespace,
            "verify_tls": self.verify_tls,
            **overrides,
        }
        return DashboardSettings.model_validate(values)
