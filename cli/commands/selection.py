"""What every maintenance command shares: which sites and update types, the policy file, and the run itself."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from fleet.model.summary import Selection, Summary, UpdateType
from fleet.model.vocabulary import run_line

if TYPE_CHECKING:
    from fleet.engine.night import NightRequest

T = TypeVar("T")

Sites = Annotated[list[str] | None, typer.Option("--sites", help="Site ids or domains (repeat or comma-separate).")]
Tags = Annotated[list[str] | None, typer.Option("--tags", help="Only sites with one of these tags.")]
Clients = Annotated[list[str] | None, typer.Option("--clients", help="Only sites of these clients.")]
Types = Annotated[list[str] | None, typer.Option("--types", help="Update types: translation, plugin, theme, core.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Plan only: no write request is sent.")]
PolicyPath = Annotated[Path | None, typer.Option("--policy", help="Policy file (YAML or TOML).")]
ReportDir = Annotated[Path | None, typer.Option("--report-dir", help="Where run directories go.")]
At = Annotated[
    datetime | None,
    typer.Option("--at", formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"],
                 help="With --dry-run: plan as if it were this moment (e.g. 2026-12-24T02:00:00Z; no zone = UTC)."),
]


def split(values: list[str] | None) -> list[str]:
    """`--sites 1,2 --sites shop.example` -> ["1", "2", "shop.example"]."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def selection(sites: list[str] | None, tags: list[str] | None, clients: list[str] | None,
              types: list[str] | None = None) -> Selection:
    try:
        chosen_types = [UpdateType(value) for value in split(types)] or list(UpdateType)
    except ValueError as error:
        raise typer.BadParameter(f"{error}; use translation, plugin, theme or core", param_hint="--types") from None
    return Selection(sites=split(sites), tags=split(tags), clients=split(clients), types=chosen_types)


def check_before_the_run(label: str, request: NightRequest, sends_report: bool, *,
                         unreachable_is_fatal: bool = True, alert_flow: str | None = None) -> None:
    """Every setting, the notification blocks an alert would use, the policy file, the dashboard's answer to the
    credentials and the selection, before a flow run (or a temporary Prefect server) exists: a mistake ends here
    in seconds, with one line. At a terminal the person reads it; without one (cron, systemd) the operator is
    alerted about the `alert_flow` run that did not start, as a failed scheduled night alerts. A service
    (`unreachable_is_fatal=False`) starts anyway when the dashboard does not answer now, saying so."""
    from dashboard.client import DashboardClient
    from dashboard.errors import TransportError
    from fleet.state.continuity import adopt_legacy_state
    from orchestration.preflight import check_dashboard, check_settings
    from reporting.alert import check_alert_blocks
    from reporting.settings import MailSettings

    async def check() -> None:
        checked = check_settings(request, dashboard_from_environment=True,
                                 mail=MailSettings if sends_report else None)
        settings = checked.settings
        await check_alert_blocks(checked.mail or MailSettings.alerts_only())  # a site down, a failed night
        moved = adopt_legacy_state(settings)  # what the dashboard's memory holds, the night itself says
        if moved:
            typer.secho(moved, fg=typer.colors.YELLOW, err=True)
        try:
            async with DashboardClient.from_env(max_connections=settings.concurrency) as client:
                await check_dashboard(client, request.selection, checked)
        except TransportError as error:
            if unreachable_is_fatal:
                raise
            typer.secho(f"the dashboard does not answer now ({error}): serving anyway", fg=typer.colors.YELLOW,
                        err=True)

    run_flow(f"{label} not started", check,
             on_expected=None if alert_flow is None else lambda line: alert_unattended(label, alert_flow, line))


def alert_unattended(label: str, flow: str, line: str) -> None:
    """Alert the operator about a run that did not start, unless a person at a terminal reads the line."""
    if sys.stdin is not None and sys.stdin.isatty():
        return
    from orchestration.alert import alert_not_started

    command = f"fleet {label.split()[0]}"  # "nightly run" -> fleet nightly
    try:
        outcomes = asyncio.run(alert_not_started(command, flow, line))
    except Exception as error:  # noqa: BLE001 - the line and the exit code must still be given
        typer.secho(f"{command}: the operator could not be alerted: {type(error).__name__}: {error}",
                    fg=typer.colors.RED, err=True)
        return
    typer.echo(f"{command}: operator alerted (no terminal): {'; '.join(outcomes)}", err=True)


def print_summary(path: str) -> None:
    """The run's closing line (the same words as its reports) and where its summary went."""
    typer.echo(run_line(Summary.read(Path(path))))
    typer.echo(f"summary: {path}")


def run_flow(label: str, call: Callable[[], Awaitable[T]], on_expected: Callable[[str], None] | None = None) -> T:
    """Run a flow from the command line: an expected failure prints one line (no traceback), is handed to
    `on_expected`, and exits with its documented code (cli/errors.py); the night that broke sites, or ends with
    sites still down, still prints where its summary went."""
    from cli.errors import expected_failure, quiet_expected_tracebacks
    from fleet.rules.breakage import NightFailure

    quiet_expected_tracebacks()
    try:
        return asyncio.run(call())
    except Exception as error:
        found = expected_failure(error)
        if found is None:
            raise
        code, line = found
        if isinstance(error, NightFailure):
            print_summary(error.summary_path)
        typer.secho(f"{label}: {line}", fg=typer.colors.RED, err=True)
        if on_expected is not None:
            on_expected(f"{label}: {line}")
        raise typer.Exit(code) from None


def maintenance_app(load_flow: Callable[[], Callable[..., Awaitable[str]]], label: str, help: str, *,
                    sends_report: bool, alerts: str | None = None) -> typer.Typer:
    """A command that runs a maintenance flow (nightly or update) on a selection and prints where its summary
    went; exits with the codes of cli/errors.py (2 for a bad option, setting, policy file or a selection that
    matches no site, 3 for refused credentials, 4 for an unreachable dashboard: all before any flow run; 7 for
    a night that broke sites, 8 for one that ends with sites broken on earlier nights still down, 9 for one
    that did nothing). `alerts`: the flow whose failed runs alert the operator; started without a terminal, a
    run of it that cannot start alerts too."""
    app = typer.Typer(help=help, invoke_without_command=True, no_args_is_help=False)

    @app.callback()
    def run(dry_run: DryRun = False, policy: PolicyPath = None, sites: Sites = None, tags: Tags = None,
            clients: Clients = None, types: Types = None, report_dir: ReportDir = None, at: At = None) -> None:
        chosen = selection(sites, tags, clients, types)
        if at is not None and not dry_run:
            raise typer.BadParameter("rehearses a plan: use it with --dry-run (a run that writes is always now)",
                                     param_hint="--at")
        from fleet.engine.night import NightRequest

        request = NightRequest(selection=chosen, dry_run=dry_run, policy_file=str(policy or ""),
                               report_dir=str(report_dir or ""), at=at)
        check_before_the_run(label, request, sends_report, alert_flow=alerts)
        flow = load_flow()
        path = run_flow(f"{label} failed", lambda: flow(
            selection=chosen, dry_run=dry_run, policy_file=request.policy_file, report_dir=request.report_dir, at=at,
        ))
        print_summary(path)

    run.__doc__ = help
    return app
