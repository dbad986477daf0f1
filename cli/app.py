"""The `fleet` command: one entry point that ties the emulator, the client, the pipeline and the reports."""

import os
import sys
from typing import Annotated

import typer

from cli.commands import (
    approve,
    blocks,
    check,
    dashboard,
    demo,
    deploy,
    emulator,
    guard,
    holds,
    incidents,
    memory,
    nightly,
    report,
    runs,
    screenshots,
    serve,
    update,
    vulnerabilities,
)

app = typer.Typer(
    help="Keep a fleet of WordPress sites patched through a MainWP-style dashboard.", no_args_is_help=True
)


def print_version(wanted: bool) -> None:
    if wanted:
        import platform
        from importlib.metadata import version

        typer.echo(f"fleet-maintenance {version('fleet-maintenance')} (prefect {version('prefect')}, "
                   f"python {platform.python_version()})")
        raise typer.Exit()


NO_SETTINGS = {"emulator"}  # the test double reads no FLEET_* setting


@app.callback()
def quiet_prefect(
    context: typer.Context,
    show_version: Annotated[bool, typer.Option("--version", callback=print_version, is_eager=True,
                                               help="Print the version and exit.")] = False,
) -> None:
    """Prefect's telemetry is off for the project's commands unless the operator turned it on: it reaches for the
    internet, which an unattended night may not have, and printed a traceback on fresh Prefect homes; its
    client side (DO_NOT_TRACK) printed a notice on a terminal's first run. A temporary Prefect server (no
    PREFECT_API_URL) gets two minutes to start, not 20 s: a busy machine needs it. A FLEET_* name no setting
    reads is one line naming the nearest known one, before any work (exit 2)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    if context.invoked_subcommand in NO_SETTINGS or {"--help", "-h"} & set(sys.argv[1:]):
        return
    from cli.setting_names import check_setting_names
    from dashboard.home import SettingsError

    try:
        check_setting_names()
    except SettingsError as error:
        typer.secho(f"fleet {context.invoked_subcommand} not started: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


app.add_typer(emulator.app, name="emulator")
app.add_typer(dashboard.app, name="dashboard")
app.add_typer(nightly.app, name="nightly")
app.add_typer(update.app, name="update")
app.add_typer(check.app, name="check")
app.add_typer(report.app, name="report")
app.add_typer(demo.app, name="demo")
app.add_typer(serve.app, name="serve")
app.add_typer(blocks.app, name="blocks")
app.add_typer(holds.app, name="holds")
app.add_typer(runs.app, name="runs")
app.add_typer(incidents.app, name="incidents")
app.add_typer(memory.app, name="memory")
app.add_typer(approve.app, name="approve")
app.add_typer(deploy.app, name="deploy")
app.add_typer(screenshots.app, name="screenshots")
app.add_typer(vulnerabilities.app, name="vulnerabilities")
app.add_typer(vulnerabilities.app, name="vulns", hidden=True)  # the old name, kept for existing scripts
app.add_typer(guard.app, name="guard")
