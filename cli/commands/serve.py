"""`fleet serve`: serve the nightly schedule and the manual-trigger deployments from this process."""

import typer

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
    when the night runs next, or warn when the server schedules no run of it. The scheduled night's settings
    (FLEET_*, the policy file, the mail, the key) are checked first: a service that would fail every night does
    not start."""
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
    check_before_the_run("fleet serve", NightRequest(), sends_report=True, unreachable_is_fatal=False)
    try:
        serve_deployments(settings, say)
    except KeyboardInterrupt:
        typer.echo("stopped: the schedule is paused until fleet serve runs again")
    except SettingsError as error:  # the automations' settings (FLEET_NOTIFY_BLOCK naming no saved block, ...)
        typer.secho(f"fleet serve not started: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
