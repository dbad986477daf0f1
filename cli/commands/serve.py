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
    when the night runs next, or warn when the server schedules no run of it."""
    from deployments.serve import ScheduleSettings, serve_deployments

    try:
        settings = ScheduleSettings()
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        serve_deployments(settings, say)
    except KeyboardInterrupt:
        typer.echo("stopped: the schedule is paused until fleet serve runs again")
