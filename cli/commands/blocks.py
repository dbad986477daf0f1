"""`fleet blocks save`: store the dashboard connection and the mail server as Prefect blocks."""

from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(help="Store credentials from the FLEET_* environment as Prefect blocks.", no_args_is_help=True)


@app.command("save")
def save(
    dashboard: Annotated[str, typer.Option(help="Name of the Dashboard Connection block to write.")] = "default",
    email: Annotated[
        str | None, typer.Option(help="Also write an e-mail credentials block (prefect-email) with this name.")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace blocks that already exist.")] = False,
) -> None:
    """Read FLEET_BASE_URL, FLEET_API_KEY, FLEET_ABILITIES_* (and FLEET_SMTP_*) and save them as blocks, which
    flows then take by name (`dashboard` parameter, `--email-block`). Secrets are stored encrypted by Prefect."""
    from pydantic import ValidationError

    from dashboard.block import DashboardConnection
    from dashboard.home import settings_problem
    from dashboard.settings import DashboardSettings
    from reporting.settings import MailSettings

    console = Console()
    try:
        connection = DashboardConnection.from_settings(DashboardSettings())
        mail = MailSettings().to_credentials() if email else None
    except ValidationError as exc:  # the variables and where they were set, never a value
        typer.secho(f"blocks not saved: {settings_problem(exc)}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        connection.save(dashboard, overwrite=overwrite)
        console.print(f"Saved Dashboard Connection block {dashboard!r} ({connection.base_url}).")
        if mail is not None and email:
            mail.save(email, overwrite=overwrite)
            console.print(f"Saved e-mail credentials block {email!r} ({mail.smtp_server}).")
    except ValueError as exc:  # Prefect refuses to overwrite without --overwrite
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
