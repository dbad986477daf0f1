"""`fleet nightly`: run the nightly maintenance flow against the dashboard configured in the environment."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from fleet.summary import Selection, Summary, UpdateType

app = typer.Typer(help="Run the nightly maintenance flow (sync, updates, checks, reconcile, summary).",
                  invoke_without_command=True, no_args_is_help=False)


def _split(values: list[str] | None) -> list[str]:
    """`--sites 1,2 --sites shop.example` -> ["1", "2", "shop.example"]."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


@app.callback()
def nightly(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Plan only: no write request is sent.")] = False,
    policy: Annotated[Path | None, typer.Option("--policy", help="Policy file (YAML or TOML).")] = None,
    sites: Annotated[
        list[str] | None, typer.Option("--sites", help="Site ids or domains (repeat or comma-separate).")
    ] = None,
    tags: Annotated[list[str] | None, typer.Option("--tags", help="Only sites with one of these tags.")] = None,
    clients: Annotated[list[str] | None, typer.Option("--clients", help="Only sites of these clients.")] = None,
    types: Annotated[
        list[str] | None, typer.Option("--types", help="Update types: translation, plugin, theme, core.")
    ] = None,
    report_dir: Annotated[Path | None, typer.Option("--report-dir", help="Where run directories go.")] = None,
) -> None:
    """Run the nightly flow against FLEET_BASE_URL and print where summary.json went."""
    from dashboard.errors import DashboardError
    from fleet.policy import PolicyError, load_policy

    try:
        chosen_types = [UpdateType(value) for value in _split(types)] or list(UpdateType)
    except ValueError as error:
        raise typer.BadParameter(f"{error}; use translation, plugin, theme or core", param_hint="--types") from None
    if policy is not None:
        try:
            load_policy(policy)  # fail before contacting anything
        except PolicyError as error:
            typer.secho(str(error), fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
    selection = Selection(sites=_split(sites), tags=_split(tags), clients=_split(clients), types=chosen_types)

    from flows.nightly import nightly_maintenance

    try:
        path = asyncio.run(nightly_maintenance(
            selection=selection, dry_run=dry_run, policy_file=str(policy) if policy else None,
            report_dir=str(report_dir) if report_dir else None,
        ))
    except (DashboardError, PolicyError) as error:
        typer.secho(f"nightly run failed: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    summary = Summary.read(Path(path))
    counts = ", ".join(f"{count} {outcome.value}" for outcome, count in summary.counts.by_outcome.items())
    typer.echo(f"{'dry run' if summary.dry_run else 'run'} {summary.run_id}: {len(summary.items)} item(s): {counts}")
    typer.echo(f"summary: {path}")
