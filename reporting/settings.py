"""Mail settings for report delivery: from the environment (FLEET_*) or the `prefect-email` block."""

from __future__ import annotations

from email.utils import parseaddr
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import NoDecode

from dashboard.home import FleetSettings, SettingsError

if TYPE_CHECKING:
    from prefect_email import EmailServerCredentials


class SmtpSecurity(StrEnum):
    ssl = "ssl"  # implicit TLS (port 465)
    starttls = "starttls"  # plain connection upgraded with STARTTLS (port 587)
    none = "none"  # no encryption (port 25; local relays only)


DEFAULT_PORTS = {SmtpSecurity.ssl: 465, SmtpSecurity.starttls: 587, SmtpSecurity.none: 25}
EML_SENDER = "fleet-maintenance@localhost"  # the From of a `.eml` file when FLEET_MAIL_FROM is not set


def _address(value: str) -> bool:
    return "@" in value and not any(c in value for c in "\r\n<>, ")


class NotifySettings(FleetSettings):
    """The one Prefect notification block where operators look (chat, pager): every alert, and the automations'."""

    notify_block: str | None = Field(
        None, description="A saved Prefect notification block, as `block-type-slug/name` (e.g. `slack-webhook/ops`, "
        "`custom-webhook/ops`), that gets every alert the operator's e-mail gets in one short text with its link, "
        "and the notifications of the automations `fleet serve` creates.")
    alert_blocks: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Prefect notification blocks that also get a failed night's alert, "
        "as `block-type-slug/name` (e.g. `slack-webhook/ops`, `custom-webhook/pager`), comma-separated."
    )

    @field_validator("alert_blocks", mode="before")
    @classmethod
    def _split_names(cls, value: object) -> object:
        return _split(value)

    @field_validator("notify_block")
    @classmethod
    def _block_type_and_name(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        kind, slash, name = value.strip().partition("/")
        if not slash or not kind or not name or "/" in name:
            raise ValueError(f"{value.strip()!r} is not `block-type-slug/name` (e.g. `slack-webhook/ops`)")
        return value.strip()


def _split(value: object) -> object:
    """A comma-separated list from the environment or a `.env` file."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def notify_block_alone() -> str | None:
    """FLEET_NOTIFY_BLOCK read on its own, for an alert whose mail settings are unusable: a bad mail setting must
    not silence the chat too (a bad FLEET_NOTIFY_BLOCK itself: None)."""
    try:
        return NotifySettings().notify_block
    except ValueError:
        return None


class MailSettings(NotifySettings):
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
    mail_from: str | None = Field(None, validate_default=True, description="The sender: required to send over SMTP "
                                  "(a reply reaches it unless FLEET_REPLY_TO says otherwise).")
    reply_to: str | None = Field(None, description="Where replies to every message go (a client's own `reply_to` "
                                 "in the policy wins for its report).")
    report_to: Annotated[list[str], NoDecode] = Field(default_factory=list, description="Operator addresses.")

    @field_validator("report_to", mode="before")
    @classmethod
    def _split_addresses(cls, value: object) -> object:
        return _split(value)

    @field_validator("report_to")
    @classmethod
    def _check_addresses(cls, value: list[str]) -> list[str]:
        bad = [address for address in value if not _address(address)]
        if bad:
            raise ValueError(f"not an e-mail address: {', '.join(repr(b) for b in bad)}")
        return value

    @field_validator("mail_from", "reply_to")
    @classmethod
    def _check_address(cls, value: str | None) -> str | None:
        """A sender may carry a display name (`Fleet reports <reports@agency.example>`)."""
        if value is None or not value.strip():
            return None
        if not _address(parseaddr(value)[1]) or any(c in value for c in "\r\n"):
            raise ValueError(f"not an e-mail address: {value!r}")
        return value.strip()

    @field_validator("mail_from")
    @classmethod
    def _a_real_send_needs_a_sender(cls, value: str | None, info: ValidationInfo) -> str | None:
        """Mail sent over SMTP says who sent it, so that a reply reaches someone: never a made-up localhost
        address. Checked with the other settings, before the night (the `.eml` files need none)."""
        if value is None and info.data.get("smtp_host"):
            raise PydanticCustomError("sender_missing", "mail sent over SMTP (FLEET_SMTP_HOST) needs a sender "
                                      "address that replies can reach")
        return value

    @classmethod
    def without_mail(cls) -> MailSettings:
        """Only the notification blocks the settings name, the e-mail written as a file: for an alert whose mail
        settings are unusable (a bad mail setting must not silence the chat too)."""
        try:
            blocks = NotifySettings()
        except ValueError:  # a bad FLEET_NOTIFY_BLOCK itself
            blocks = NotifySettings.model_construct(notify_block=None, alert_blocks=[])
        return cls.model_construct(smtp_host=None, report_to=[], alert_blocks=blocks.alert_blocks,
                                   notify_block=blocks.notify_block)

    @classmethod
    def alerts_only(cls) -> MailSettings:
        """The channels of an alert of a run that sends no report: a bad mail setting is not its mistake."""
        try:
            return cls()
        except ValidationError:
            return cls.without_mail()

    @property
    def configured(self) -> bool:
        """True when messages go over SMTP; otherwise they are written as `.eml` files."""
        return bool(self.smtp_host)

    @property
    def sender(self) -> str:
        """The From of every message: FLEET_MAIL_FROM, or a placeholder in a `.eml` file to forward by hand."""
        return self.mail_from or EML_SENDER

    def replies_to(self, own: str | None = None) -> str | None:
        """Where a reply goes: the client's own address (`own`), FLEET_REPLY_TO, else the sender; None when no
        sender is set (a `.eml` file to forward by hand: nobody would read a reply to it)."""
        return own or self.reply_to or self.mail_from

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
    def for_block(cls, credentials: EmailServerCredentials | None) -> MailSettings:
        """A flow's mail settings: its `email_block` for the server when one was chosen, else FLEET_SMTP_*; unusable
        ones are the one line naming each variable (`SettingsError`)."""
        try:
            return cls.from_credentials(credentials) if credentials is not None else cls()
        except ValidationError as error:
            raise SettingsError.of(error) from None

    @classmethod
    def from_block(cls, name: str, **overrides: object) -> MailSettings:
        """Load a saved `EmailServerCredentials` block by name."""
        from prefect_email import EmailServerCredentials

        return cls.from_credentials(EmailServerCredentials.load(name), **overrides)

