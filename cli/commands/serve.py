"""`fleet serve`: serve the nightly schedule and the manual-trigger deployments from this process."""

from __future__ import annotations

import signal
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
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C, even where it began ignored (a script's `&`)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # systemd's stop, until serving: as Ctrl-C
    try:
        stopped = check_and_serve()
    except KeyboardInterrupt:  # before any deployment was registered (serving handles its own stop)
        typer.echo("stopped before serving anything")
        return
    except Exception as error:
        if not caused_by_a_stop(error):
            raise
        typer.echo("stopped before serving anything")  # the Ctrl-C came inside a library that wrapped it
        return
    if not stopped.complete:
        raise typer.Exit(1)


def caused_by_a_stop(error: BaseException) -> bool:
    """A KeyboardInterrupt (Ctrl-C, or SIGTERM before serving) wrapped by the code it cut into: pydantic, busy
    serializing Prefect's settings as the signal came, raised a PydanticSerializationError from it."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        if isinstance(found, KeyboardInterrupt):
            return True
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return False


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
