"""`fleet serve`: serve the nightly schedule and the manual-trigger deployments from this process."""

import typer

app = typer.Typer(help="Serve the nightly schedule and the manual triggers (needs a Prefect server).")


@app.callback(invoke_without_command=True)
def serve() -> None:
    """Register the deployments with the Prefect server (PREFECT_API_URL) and run their flow runs here."""
    from deployments.serve import ScheduleSettings, serve_deployments

    try:
        settings = ScheduleSettings()
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    serve_deployments(settings)
