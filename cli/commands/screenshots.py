"""`fleet screenshots serve`: a Prefect task worker that takes the nights' screenshots (`tasks.page_checks`)."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(help="Take the visual checks' screenshots for the nights, as a Prefect task worker.",
                  no_args_is_help=True)


@app.command("serve")
def serve(
    runs: Annotated[int, typer.Option(help="Batches of shots this worker takes at once (each loads "
                                           "FLEET_VISUAL_CONCURRENCY pages at a time).")] = 1,
) -> None:
    """Serve the nights' screenshot batches until stopped: needs PREFECT_API_URL (the night's Prefect server),
    the system Chromium, and the result storage the night uses (the local folder on one machine)."""
    from prefect.task_worker import serve as serve_tasks

    from tasks.page_checks import shoot_pages

    serve_tasks(shoot_pages, limit=runs)
