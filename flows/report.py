"""`report`: render (and send) the maintenance reports of any past run from its summary.json."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from prefect import flow
from pydantic import Field

from reporting.run_report import ReportResult
from reporting.settings import MailSettings
from tasks.report import report_run

RunDir = Annotated[str, Field(description="The run directory that holds summary.json.")]
Send = Annotated[bool, Field(description="E-mail the reports (or write .eml files without SMTP settings).")]
EmailBlock = Annotated[
    str | None, Field(description="Name of a prefect-email EmailServerCredentials block; empty means FLEET_SMTP_*.")
]


async def mail_settings(email_block: str | None) -> MailSettings:
    if not email_block:
        return MailSettings()
    from prefect_email import EmailServerCredentials

    return MailSettings.from_credentials(await EmailServerCredentials.aload(email_block))


@flow(name="report", log_prints=False)
async def report(run_dir: RunDir, send: Send = False, email_block: EmailBlock = None) -> ReportResult:
    """Render the operator's and the clients' reports; with `send`, deliver them and record each recipient.

    Fails (naming every recipient not reached) when a delivery fails.
    """
    return await report_run(Path(run_dir), send=send, settings=await mail_settings(email_block) if send else None)
