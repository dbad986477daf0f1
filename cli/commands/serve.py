"""`fleet serve`: serve the nightly schedule and the manual-trigger deployments from this process."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from deployments.stopping import StopReport

app = typer.Typer(help="Serve the nightly schedule and the manual triggers (needs a Prefect server).")


def say(line: str, loud: bool) -> None:
    """fleet serve's own lines: a warning in red on standard error, the rest on standard output."""
    if loud:
        typer.secho(line, fg=typer.colors.RED, bold=True, err=True)
    else:
        typer.echo(line)


@app.callback(invoke_without_command=True)
def serve() -> None:
    """Register the deployments with the Prefect server (PREFECT_API_URL) and run their flow runs here; print
    when the night runs next, or warn when the server schedules no run of it. Stopping it (Ctrl-C, SIGTERM) pauses
    every schedule, or says loudly which it could not (exit 1). The scheduled night's settings
    (FLEET_*, the policy file, the mail, the key) are checked first: a service that would fail every night does
    not start."""
    signal.signal(signal.SIGINT, stop_before_serving)  # Ctrl-C, even where it began ignored (a script's `&`)
    signal.signal(signal.SIGTERM, stop_before_serving)  # systemd's stop; serving puts handlers of its own
    stopped = check_and_serve()
    if not stopped.complete:
        raise typer.Exit(1)


def stop_before_serving(signum: int, frame: object) -> None:
    """A stop before any deployment is registered ends the process at once: nothing is served yet. Not as a
    KeyboardInterrupt: raised wherever the signal lands, the code it cut into may turn it into an error of its
    own (pydantic, serializing Prefect's settings during an import, raised a PydanticSerializationError that
    keeps only the interrupt's name), and `fleet serve` printed a traceback instead of stopping."""
    with contextlib.suppress(Exception):  # what was printed before the stop; the signal may land inside a write
        sys.stdout.flush()
    os.write(sys.stdout.fileno(), b"stopped before serving anything\n")
    os._exit(0)


def check_and_serve() -> StopReport:
    from pydantic import ValidationError

    from cli.commands.selection import check_before_the_run
    from dashboard.home import SettingsError, settings_problem
    from deployments.serve import ScheduleSettings, serve_deployments
    from fleet.engine.night import NightRequest

    try:
        settings = ScheduleSettings()
    except ValidationError as exc:
        typer.secho(f"fleet serve not started: {settings_problem(exc)}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    try:
        check_before_the_run("fleet serve", NightRequest(), sends_report=True, unreachable_is_fatal=False)
        return serve_deployments(settings, say)
    except SettingsError as error:  # the automations' settings (FLEET_NOTIFY_BLOCK naming no saved block, ...)
        typer.secho(f"fleet serve not started: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
