"""`report`: render (and send) the maintenance reports of any past run from its summary.json."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.parameters import SavedEmailServer
from reporting.result import ReportResult
from reporting.settings import MailSettings


@flow(name="report", log_prints=False)
async def report(
    run_dir: str,
    send: bool = False,
    email_block: SavedEmailServer = None,
) -> ReportResult:
    """Render the operator's and the clients' reports; with `send`, deliver them and record each recipient.

    Fails (naming every recipient not reached) when a delivery fails.

    Args:
        run_dir: The run directory that holds summary.json.
        send: E-mail the reports (or write .eml files without SMTP settings).
    """
    # The report's libraries (pandas, matplotlib) load only when a report is made: not for `fleet serve`, which
    # only registers this flow.
    from tasks.report import report_run

    return await report_run(Path(run_dir), send=send, settings=MailSettings.for_block(email_block) if send else None)
