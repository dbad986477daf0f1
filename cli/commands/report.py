"""`fleet report RUN_DIR [--send]`: render (and send) the maintenance reports of any past run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# A group (for cli/app.py's add_typer) whose callback is the command; options may follow RUN_DIR.
app = typer.Typer(help="Render (and send) the maintenance reports of a run.", invoke_without_command=True,
                  no_args_is_help=True, context_settings={"allow_interspersed_args": True})


@app.callback()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory holding summary.json.", show_default=False)],
    send: Annotated[bool, typer.Option("--send", help="E-mail the reports (FLEET_SMTP_*), or write .eml files "
                                                      "beside summary.json when no SMTP host is set.")] = False,
    email_block: Annotated[str | None, typer.Option("--email-block", help="Take the SMTP server from this "
                                                    "prefect-email EmailServerCredentials block.")] = None,
    trend_runs: Annotated[int, typer.Option("--trend-runs", min=1, help="Runs shown in the trends.")] = 14,
    client: Annotated[list[str] | None, typer.Option(
        "--client", help="With --send: send only this client's report (repeatable), also one held for review "
        "because the night broke its site.")] = None,
) -> None:
    """Render the operator's and every client's report under RUN_DIR/report/; with --send, deliver them."""
    from pydantic import ValidationError

    from dashboard.home import settings_problem
    from fleet.model.summary import SUMMARY_FILE
    from reporting.rows import SummaryError
    from reporting.run_report import ClientChoiceError, render_run
    from reporting.settings import MailSettings

    if not (run_dir / SUMMARY_FILE).is_file():
        raise typer.BadParameter(f"no {SUMMARY_FILE} in {run_dir}", param_hint="RUN_DIR")
    if client and not send:
        raise typer.BadParameter("--client chooses whom --send mails: give --send too", param_hint="--client")
    try:
        settings = (MailSettings.from_block(email_block) if email_block else MailSettings()) if send else None
    except ValidationError as error:  # the variables and where they were set, never a value
        typer.secho(f"reports not sent: {settings_problem(error)}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    try:
        result = render_run(run_dir, send=send, settings=settings, trend_runs=trend_runs, clients=client or None)
    except (ValidationError, SummaryError) as error:
        typer.secho(f"invalid summary: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except ClientChoiceError as error:
        typer.secho(str(error), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    for path in result.files:
        typer.echo(f"wrote {path}")
    for delivery in result.deliveries:
        if delivery.accepted:
            typer.echo(f"sent {delivery.report} report to {delivery.recipient}: {delivery.answer}")
        elif delivery.held:
            typer.secho(f"{delivery.report} report {delivery.answer}", fg=typer.colors.YELLOW)
    for problem in result.problems:
        typer.secho(problem, fg=typer.colors.RED, err=True)
    if not result.ok:
        raise typer.Exit(1)
