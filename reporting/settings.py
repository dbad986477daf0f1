"""Mail settings for report delivery: from the environment (FLEET_*) or the `prefect-email` block."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from dashboard.home import FleetSettings

if TYPE_CHECKING:
    from prefect_email import EmailServerCredentials


class SmtpSecurity(StrEnum):
    ssl = "ssl"  # implicit TLS (port 465)
    starttls = "starttls"  # plain connection upgraded with STARTTLS (port 587)
    none = "none"  # no encryption (port 25; local relays only)


DEFAULT_PORTS = {SmtpSecurity.ssl: 465, SmtpSecurity.starttls: 587, SmtpSecurity.none: 25}


class MailSettings(FleetSettings):
    """Where and how reports are sent. Without `smtp_host` the messages are written as `.eml` files."""

    smtp_host: str | None = None
    smtp_port: int | None = Field(None, ge=1, le=65535, description="Defaults to 465 / 587 / 25 by security.")
    smtp_security: SmtpSecurity = SmtpSecurity.starttls
    smtp_user: str | None = None
    smtp_password: SecretStr | None = None
    smtp_timeout: float = Field(30.0, gt=0)
    smtp_verify_tls: bool = True
    smtp_ca_file: Path | None = Field(None, description="A private CA bundle to verify the server against.")
    smtp_attempts: int = Field(4, ge=1, description="Tries per message before a recipient counts as refused.")
    smtp_retry_wait: float = Field(2.0, ge=0, description="First backoff in seconds; doubles each try.")
    mail_from: str = "fleet-maintenance@localhost"
    report_to: Annotated[list[str], NoDecode] = Field(default_factory=list, description="Operator addresses.")
    alert_blocks: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Prefect notification blocks that also get a failed night's alert, "
        "as `block-type-slug/name` (e.g. `slack-webhook/ops`, `custom-webhook/pager`), comma-separated."
    )

    @field_validator("report_to", "alert_blocks", mode="before")
    @classmethod
    def _split_addresses(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("report_to")
    @classmethod
    def _check_addresses(cls, value: list[str]) -> list[str]:
        bad = [address for address in value if "@" not in address or any(c in address for c in "\r\n<>, ")]
        if bad:
            raise ValueError(f"not an e-mail address: {', '.join(repr(b) for b in bad)}")
        return value

    @property
    def configured(self) -> bool:
        """True when messages go over SMTP; otherwise they are written as `.eml` files."""
        return bool(self.smtp_host)

    @property
    def port(self) -> int:
        return self.smtp_port or DEFAULT_PORTS[self.smtp_security]

    @classmethod
    def from_credentials(cls, credentials: EmailServerCredentials, **overrides: object) -> MailSettings:
        """Take the server, port, security and login from a `prefect-email` block; the rest from FLEET_*."""
        from prefect_email.credentials import SMTPServer, SMTPType

        server = credentials.smtp_server
        smtp_type = SMTPType[credentials.smtp_type.upper()] if isinstance(credentials.smtp_type, str) else (
            credentials.smtp_type
        )
        security = {
            SMTPType.SSL: SmtpSecurity.ssl,
            SMTPType.STARTTLS: SmtpSecurity.starttls,
            SMTPType.INSECURE: SmtpSecurity.none,
        }[smtp_type]
        values: dict[str, object] = {
            "smtp_host": server.value if isinstance(server, SMTPServer) else server,
            "smtp_port": credentials.smtp_port or smtp_type.value,
            "smtp_security": security,
            "smtp_user": credentials.username,
            "smtp_password": credentials.password,
            "smtp_verify_tls": credentials.verify if credentials.verify is not None else True,
        }
        return cls(**{**values, **overrides})

    def to_credentials(self) -> EmailServerCredentials:
        """The `prefect-email` block holding this server and login (what `fleet blocks save` stores)."""
        from prefect_email import EmailServerCredentials
        from prefect_email.credentials import SMTPType

        if not self.smtp_host:
            raise ValueError("FLEET_SMTP_HOST is not set: there is no mail server to save")
        smtp_type = {
            SmtpSecurity.ssl: SMTPType.SSL,
            SmtpSecurity.starttls: SMTPType.STARTTLS,
            SmtpSecurity.none: SMTPType.INSECURE,
        }[self.smtp_security]
        return EmailServerCredentials(
            smtp_server=self.smtp_host,
            smtp_port=self.port,
            smtp_type=smtp_type,
            username=self.smtp_user,
            password=self.smtp_password or "",
            verify=self.smtp_verify_tls,
        )

    @classmethod
    def from_block(cls, name: str, **overrides: object) -> MailSettings:
        """Load a saved `EmailServerCredentials` block by name."""
        from prefect_email import EmailServerCredentials

        return cls.from_credentials(EmailServerCredentials.load(name), **overrides)


def mail_settings(email_block: EmailServerCredentials | None) -> MailSettings:
    """The mail settings of a flow run: a saved block's server and login, else the FLEET_* environment."""
    return MailSettings.from_credentials(email_block) if email_block is not None else MailSettings()
