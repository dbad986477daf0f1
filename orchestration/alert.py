"""The nightly flow's failure hook: a night that fails or crashes tells the operator at once.

A Prefect state hook, not a task: it runs when the flow run enters Failed or Crashed, whatever failed (the
dashboard unreachable, bad credentials, a bug, or the night breaking sites). The channels are in reporting/alert.py.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from dashboard.home import fleet_home, refused_credential, settings_problem

if TYPE_CHECKING:
    from reporting.alert import Notice

log = logging.getLogger(__name__)
T = TypeVar("T")


async def saved_block(value: Any, kind: type[T]) -> T | None:
    """A block parameter as the flow run recorded it: the block, a reference to a saved one, or nothing."""
    if isinstance(value, kind):
        return value
    if isinstance(value, dict) and "$ref" in value:
        try:
            return await kind.aload_from_ref(value["$ref"])  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - the environment is the fallback
            log.warning("alert: the %s block of the run could not be loaded", kind.__name__)
    return None


async def dashboard_host(block: Any) -> str:
    """The dashboard as every message names it (`dashboard_name`), from the run's block or the environment."""
    from dashboard.block import DashboardConnection
    from reporting.alert import dashboard_name

    connection = await saved_block(block, DashboardConnection)
    url = connection.base_url if connection is not None else ""
    if not url and isinstance(block, dict):  # an unsaved block, recorded by its fields
        url = str(block.get("base_url") or "")
    if not url:
        try:
            from dashboard.settings import DashboardSettings

            url = DashboardSettings().base_url
        except Exception:  # noqa: BLE001 - the settings may be what failed: fall back to the raw variable
            url = os.environ.get("FLEET_BASE_URL", "")
    return dashboard_name(url)


async def failure_of(state: Any) -> BaseException | None:
    """The exception that failed the run, if it can be read."""
    try:
        error = await state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - a result that cannot be read: the message still says what failed
        return None
    return error if isinstance(error, BaseException) else None


async def error_text(state: Any, block: Any = None) -> str:
    """The exception's own text (all its lines), else the state's message. Refused credentials (a key revoked
    since the service started) say which setting to fix and where it was set, or that the run's block holds them."""
    from dashboard.errors import AuthenticationError, PermissionDenied

    error = await failure_of(state)
    if error is None:
        return state.message or state.name
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, AuthenticationError | PermissionDenied):
        held = "the credentials of the run's DashboardConnection block" if block else refused_credential(error.path)
        return f"the dashboard refused {held}: {text}"
    return text


async def alert_operator(flow: Any, flow_run: Any, state: Any) -> None:
    """`on_failure` / `on_crashed` hook: send the alert by e-mail (or `.eml`) and the notification blocks. A
    mistake in a run a person started (a setting, the policy file, the selection) is theirs to read on the run;
    a scheduled run that fails on one missed its night and alerts. A night failed only because sites broken on
    earlier nights are still down sends nothing here: the incidents step alerted about each, at most once a day
    (nights may run hourly). A night failed because it broke sites names only the breaks not told when found (each
    break found after an update step was its own message then): one break, one message."""
    from dashboard.errors import ConfigurationError
    from dashboard.home import SettingsError
    from fleet.rules.breakage import SitesBrokenByRun
    from fleet.rules.incidents import SitesStillDown
    from fleet.rules.plan import NoSiteMatches
    from fleet.rules.policy import PolicyError
    from reporting.alert import Alert, run_link

    failure = await failure_of(state)
    if isinstance(failure, SitesStillDown):
        log.warning("flow run %s: sites still down; the incidents step alerts about each once a day", flow_run.name)
        return
    usage_errors = (SettingsError, ConfigurationError, PolicyError, NoSiteMatches)  # said in one line by preflight
    if isinstance(failure, usage_errors) and not getattr(flow_run, "auto_scheduled", False):
        log.info("no alert for run %s: a usage mistake in a run a person started (%s)", flow_run.name, state.message)
        return
    parameters = flow_run.parameters or {}
    error = await error_text(state, parameters.get("dashboard"))
    if isinstance(failure, SitesBrokenByRun):
        untold = breaks_not_told(failure)
        if untold is None:
            log.warning("flow run %s: each site it broke was alerted when it broke", flow_run.name)
            return
        error = f"{type(failure).__name__}: {untold}"
    alert = Alert(
        flow=flow.name,
        run_name=flow_run.name,
        run_id=str(flow_run.id),
        state=state.name,
        dashboard=await dashboard_host(parameters.get("dashboard")),
        error=error,
        ui_url=run_link(str(flow_run.id)),
    )
    await send_to_operator(alert, parameters.get("report_dir"), parameters.get("email_block"))


def breaks_not_told(failure: Any) -> str | None:
    """The failure message of a night that broke sites, naming only the sites not alerted when they broke (found
    by the check after the night, not by a probe after an update step); None when every one was."""
    from fleet.model.summary import Summary
    from fleet.rules.breakage import broken_message

    try:
        summary = Summary.read(Path(failure.summary_path))
    except (OSError, ValueError):  # the summary cannot be read: say the whole message
        return str(failure)
    untold = [alarm for alarm in summary.broken if alarm.containment is None]
    return broken_message(untold, summary.run_id) if untold else None


async def alert_not_started(command: str, flow: str, error: str) -> list[str]:
    """A night started without a terminal (cron, systemd) that stopped before its flow run: the operator is told on
    the channels of a failed scheduled night (the mail settings and notification blocks of the environment)."""
    from reporting.alert import NotStartedNotice

    notice = NotStartedNotice(command=command, flow=flow, dashboard=await dashboard_host(None), error=error,
                              at=datetime.now(UTC))
    return await send_to_operator(notice, None, None)


async def send_to_operator(alert: Notice, report_dir: str | None, email_block: Any) -> list[str]:
    """Deliver by e-mail (the run's saved block, else FLEET_SMTP_*; a `.eml` under the report directory without
    them) and through the notification blocks; one line per channel."""
    from prefect_email import EmailServerCredentials

    from fleet.model.settings import PipelineSettings
    from reporting.alert import deliver_alert
    from reporting.settings import MailSettings

    try:
        alerts = Path(report_dir or PipelineSettings().report_dir) / "alerts"
    except ValueError:  # the settings may be what failed the run
        alerts = fleet_home() / "reports" / "alerts"
    unusable = None
    try:
        credentials = await saved_block(email_block, EmailServerCredentials)
        settings = MailSettings.from_credentials(credentials) if credentials is not None else MailSettings()
    except Exception as error:  # noqa: BLE001 - bad mail settings must not silence the blocks
        unusable = settings_problem(error) if isinstance(error, ValidationError) else str(error)
        log.error("alert e-mail settings unusable (%s): only the notification blocks are tried", unusable)
        settings = MailSettings.without_mail()
    return await deliver_alert(alert, settings, alerts, unusable)
