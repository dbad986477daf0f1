"""Report e-mail: MIME messages with CID images, SMTP delivery with retries, and the `.eml` fallback."""

from __future__ import annotations

import logging
import smtplib
import ssl
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr
from pathlib import Path

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from fleet.model.summary import Delivery
from reporting.model import image_subtype
from reporting.settings import MailSettings, SmtpSecurity

log = logging.getLogger(__name__)


@dataclass
class Outgoing:
    """One report ready to send: who it is for, and its message."""

    report: str  # "operator" or the client's name
    recipients: list[str]
    message: EmailMessage
    file_stem: str


@dataclass
class _Attempt:
    """Recipients still to deliver, and the final answer for each one settled so far."""

    pending: list[str]
    answers: dict[str, tuple[bool, str]] = field(default_factory=dict)
    unreachable: bool = False  # the last try could not talk to the server at all


@dataclass
class SendResult:
    deliveries: list[Delivery]
    unreachable: bool  # the server could not be reached: later messages should not wait out every retry


_STAGES = {
    smtplib.SMTPAuthenticationError: "authentication failed",
    smtplib.SMTPSenderRefused: "sender refused",
    smtplib.SMTPDataError: "message refused",
    smtplib.SMTPHeloError: "greeting refused",
    smtplib.SMTPConnectError: "connection refused",
}


class TransientSmtpError(Exception):
    """A failure worth retrying: the connection dropped or the server answered 4xx."""


def build_message(
    *,
    sender: str,
    recipients: Iterable[str],
    subject: str,
    text: str,
    html: str,
    images: dict[str, bytes],
    reply_to: str | None = None,
) -> EmailMessage:
    """multipart/alternative (text, then multipart/related HTML with the images, PNG or JPEG, by Content-ID)."""
    message = EmailMessage()
    message["Subject"] = " ".join(subject.split())
    message["From"] = sender
    if reply_to:
        message["Reply-To"] = reply_to
    message["To"] = ", ".join(recipients) or "undisclosed-recipients:;"
    message["Date"] = format_datetime(datetime.now(UTC))
    message["Message-ID"] = make_msgid(domain=_domain(sender))
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(text)
    message.add_alternative(html, subtype="html")
    html_part = message.get_payload()[1]
    for cid, image in images.items():
        subtype = image_subtype(image)
        html_part.add_related(image, maintype="image", subtype=subtype, cid=f"<{cid}>",
                              filename=f"{cid}.{'jpg' if subtype == 'jpeg' else 'png'}")
    return message


def _domain(sender: str) -> str:
    """The sender's domain for the Message-ID (`Fleet reports <reports@agency.example>` -> agency.example)."""
    address = parseaddr(sender)[1]
    return address.rpartition("@")[2] if "@" in address else "localhost"


def _tls_context(settings: MailSettings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(settings.smtp_ca_file) if settings.smtp_ca_file else None)
    if not settings.smtp_verify_tls:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _connect(settings: MailSettings) -> smtplib.SMTP:
    host, port, timeout = settings.smtp_host or "", settings.port, settings.smtp_timeout
    if settings.smtp_security is SmtpSecurity.ssl:
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=timeout, context=_tls_context(settings))
    else:
        smtp = smtplib.SMTP(host, port, timeout=timeout)
        if settings.smtp_security is SmtpSecurity.starttls:
            smtp.starttls(context=_tls_context(settings))
    smtp.ehlo_or_helo_if_needed()
    if settings.smtp_user:
        password = settings.smtp_password.get_secret_value() if settings.smtp_password else ""
        smtp.login(settings.smtp_user, password)
    return smtp


def _answer(code: int, text: bytes | str) -> str:
    message = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return f"{code} {' '.join(message.split())}".strip()


def _send_once(settings: MailSettings, outgoing: Outgoing, attempt: _Attempt) -> None:
    """One SMTP transaction for the pending recipients; permanent answers are settled, 4xx ones retried."""
    try:
        with _connect(settings) as smtp:
            code, text = smtp.mail(settings.sender)
            if code >= 400:
                raise smtplib.SMTPSenderRefused(code, text, settings.sender)
            accepted: list[str] = []
            temporary: list[str] = []
            for recipient in attempt.pending:
                code, text = smtp.rcpt(recipient)
                if code < 400:
                    accepted.append(recipient)
                elif code < 500:
                    temporary.append(recipient)
                    attempt.answers[recipient] = (False, _answer(code, text))
                else:
                    attempt.answers[recipient] = (False, _answer(code, text))
            if accepted:
                code, text = smtp.data(outgoing.message.as_bytes(policy=policy.SMTP))  # CRLF line ends
                for recipient in accepted:  # the answer to the message itself (a refused recipient keeps its own)
                    attempt.answers[recipient] = (code < 400, _answer(code, text))
                if 400 <= code < 500:
                    temporary += accepted
    except smtplib.SMTPNotSupportedError as exc:  # no STARTTLS or no AUTH: retrying cannot help
        _settle(attempt, attempt.pending, f"not supported by the server: {exc}")
        attempt.pending = []
        return
    except smtplib.SMTPResponseException as exc:
        answer = f"{_STAGES.get(type(exc), 'refused')}: {_answer(exc.smtp_code, exc.smtp_error)}"
        _settle(attempt, attempt.pending, answer)
        if exc.smtp_code >= 500:
            attempt.pending = []
            return
        raise TransientSmtpError(answer) from None
    except (smtplib.SMTPException, OSError) as exc:  # connection refused, dropped, TLS failure, timeout
        answer = f"{type(exc).__name__}: {' '.join(str(exc).split()) or 'no detail'}"
        _settle(attempt, attempt.pending, answer)
        attempt.unreachable = True
        raise TransientSmtpError(answer) from None
    attempt.unreachable = False
    attempt.pending = temporary
    if temporary:
        raise TransientSmtpError(f"temporarily refused: {', '.join(temporary)}")


def _settle(attempt: _Attempt, recipients: list[str], answer: str) -> None:
    for recipient in recipients:
        attempt.answers[recipient] = (False, answer)


def send(settings: MailSettings, outgoing: Outgoing, *, attempts: int | None = None) -> SendResult:
    """Deliver one message, retrying transient failures with exponential backoff; one Delivery per recipient."""
    attempt = _Attempt(pending=list(outgoing.recipients))
    retrying = Retrying(
        stop=stop_after_attempt(attempts or settings.smtp_attempts),
        wait=wait_exponential(multiplier=settings.smtp_retry_wait, max=60),
        retry=retry_if_exception_type(TransientSmtpError),
        reraise=False,
    )
    try:
        for try_ in retrying:
            with try_:
                _send_once(settings, outgoing, attempt)
    except RetryError as exc:  # the last attempt's answers are already recorded per recipient
        tries = retrying.statistics.get("attempt_number", 0)
        log.warning("report %r: giving up after %d tries: %s", outgoing.report, tries, exc.last_attempt.exception())
    deliveries = [
        Delivery(report=outgoing.report, recipient=recipient, accepted=accepted, answer=answer)
        for recipient, (accepted, answer) in attempt.answers.items()
    ]
    return SendResult(deliveries, attempt.unreachable)


def write_eml(outgoing: Outgoing, directory: Path, why: str) -> list[Delivery]:
    """The message as a file beside the summary instead of sent, one Delivery per intended recipient."""
    path = directory / f"{outgoing.file_stem}.eml"
    path.write_bytes(outgoing.message.as_bytes())
    answer = f"not sent: {why}; message written to {path.name}"
    return [
        Delivery(report=outgoing.report, recipient=recipient, accepted=False, answer=answer, eml_path=str(path))
        for recipient in outgoing.recipients or [""]
    ]
