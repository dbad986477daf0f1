"""The nightly flow's failure hook: a night that fails or crashes tells the operator at once.

A Prefect state hook, not a task: it runs when the flow run enters Failed or Crashed, whatever failed (the
dashboard unreachable, bad credentials, a bug, or the night breaking sites). The channels are in reporting/alert.py.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import ValidationError

from dashboard.home import fleet_home, settings_problem

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
    """The dashboard's host (and port) from the run's block or the environment; never a URL's credentials."""
    from dashboard.block import DashboardConnection

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
    parts = urlsplit(url.strip())
    if not parts.hostname:
        return "(FLEET_BASE_URL not set)"
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


async def failure_of(state: Any) -> BaseException | None:
    """The exception that failed the run, if it can be read."""
    try:
        error = await state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - a result that cannot be read: the message still says what failed
        return None
    return error if isinstance(error, BaseException) else None


async def error_text(state: Any) -> str:
    """The exception's own text (all its lines), else the state's message."""
    error = await failure_of(state)
    if error is not None:
        return f"{type(error).__name__}: {error}"
    return state.message or state.name


async def alert_operator(flow: Any, flow_run: Any, state: Any) -> None:
    """`on_failure` / `on_crashed` hook: send the alert by e-mail (or `.eml`) and the notification blocks. A
    mistake in a run a person started (a setting, the policy file, the selection) is theirs to read on the run;
    a scheduled run that fails on one missed its night and alerts. A night failed only because sites broken on
    earlier nights are still down sends nothing here: the incidents step alerted about each, at most once a day
    (nights may run hourly)."""
    from prefect.settings import PREFECT_UI_URL
    from prefect_email import EmailServerCredentials

    from fleet.model.settings import PipelineSettings
    from fleet.rules.incidents import SitesStillDown
    from reporting.alert import Alert, deliver_alert
    from reporting.settings import MailSettings, notify_block_alone
    from tasks.preflight import USAGE_ERRORS

    failure = await failure_of(state)
    if isinstance(failure, SitesStillDown):
        log.warning("flow run %s: sites still down; the incidents step alerts about each once a day", flow_run.name)
        return
    if isinstance(failure, USAGE_ERRORS) and not getattr(flow_run, "auto_scheduled", False):
        log.info("no alert for run %s: a usage mistake in a run a person started (%s)", flow_run.name, state.message)
        return
    parameters = flow_run.parameters or {}
    ui = PREFECT_UI_URL.value()
    alert = Alert(
        flow=flow.name,
        run_name=flow_run.name,
        run_id=str(flow_run.id),
        state=state.name,
        dashboard=await dashboard_host(parameters.get("dashboard")),
        error=await error_text(state),
        ui_url=f"{ui.rstrip('/')}/runs/flow-run/{flow_run.id}" if ui else None,
    )
    try:
        report_dir = Path(parameters.get("report_dir") or PipelineSettings().report_dir)
    except ValueError:  # the settings may be what failed the run
        report_dir = fleet_home() / "reports"
    unusable = None
    try:
        credentials = await saved_block(parameters.get("email_block"), EmailServerCredentials)
        settings = MailSettings.from_credentials(credentials) if credentials is not None else MailSettings()
    except Exception as error:  # noqa: BLE001 - bad mail settings must not silence the blocks
        unusable = settings_problem(error) if isinstance(error, ValidationError) else str(error)
        log.error("alert e-mail settings unusable (%s): only the notification blocks are tried", unusable)
        settings = MailSettings.model_construct(smtp_host=None, report_to=[], alert_blocks=_blocks_from_env(),
                                                notify_block=notify_block_alone())
    await deliver_alert(alert, settings, report_dir / "alerts", unusable)


def _blocks_from_env() -> list[str]:
    return [part.strip() for part in os.environ.get("FLEET_ALERT_BLOCKS", "").split(",") if part.strip()]
