"""How a command ends on an expected failure: one line of reason, a documented exit code, no traceback.

Exit codes (every command):
  0  done
  1  finished, but something needs attention (an unhealthy site in `fleet check`, a report not delivered)
  2  bad usage or configuration (an invalid option or setting, a bad policy file, a selection that matches no
     site, a URL with a password in it)
  3  authentication or permission refused by the dashboard
  4  dashboard unreachable (network, DNS, TLS, timeout), or a write whose outcome is unknown
  5  the dashboard answered with an error (not found, invalid input, server error, unexpected answer)
  6  a waited-on job did not finish (timed out, stalled, or never started)
  7  the night broke sites (the run finished; the summary and the reports say which, and the suspects)
  8  sites broken on earlier nights are still down (their incidents are open; the reports lead with them)
  9  the night did nothing: it synced no site, or attempted none of its updates (a deadline passed, the dashboard
     stopped answering); the summary and the reports say why
 10  the night did not start: another live run of the dashboard held its night lock for longer than
     FLEET_NIGHT_LOCK_WAIT_SECONDS (the line names it)
"""

from __future__ import annotations

import logging
import os
from enum import IntEnum

from pydantic import ValidationError

from dashboard.errors import (
    AuthenticationError,
    ConfigurationError,
    DashboardError,
    InvalidInput,
    JobError,
    JobNotFound,
    OutcomeUnknown,
    PermissionDenied,
    TransportError,
)
from dashboard.home import SettingsError, refused_credential, setting_source, settings_problem
from dashboard.settings import DashboardSettings
from fleet.rules.breakage import NightFailure, SitesBrokenByRun
from fleet.rules.empty_night import NightDidNothing
from fleet.rules.incidents import SitesStillDown
from fleet.rules.plan import NoSiteMatches
from fleet.rules.policy import PolicyError
from fleet.state.night_lock import NightBusy


class ExitCode(IntEnum):
    OK = 0
    NEEDS_ATTENTION = 1
    CONFIGURATION = 2
    AUTHENTICATION = 3
    UNREACHABLE = 4
    API_ERROR = 5
    JOB_NOT_FINISHED = 6
    SITES_BROKEN = 7
    SITES_STILL_DOWN = 8
    NOTHING_DONE = 9
    NIGHT_BUSY = 10


def exit_code_for(error: DashboardError) -> ExitCode:
    if isinstance(error, ConfigurationError):
        return ExitCode.CONFIGURATION
    if isinstance(error, AuthenticationError | PermissionDenied):
        return ExitCode.AUTHENTICATION
    if isinstance(error, TransportError | OutcomeUnknown):
        return ExitCode.UNREACHABLE
    if isinstance(error, JobError) and not isinstance(error, JobNotFound):
        return ExitCode.JOB_NOT_FINISHED
    if isinstance(error, InvalidInput) and error.code == "client_validation":
        return ExitCode.CONFIGURATION
    return ExitCode.API_ERROR


EXPECTED = (DashboardError, PolicyError, NoSiteMatches, NightFailure, NightBusy, SettingsError, ValidationError)


def dashboard_host() -> str:
    """The dashboard's host and port from FLEET_BASE_URL, wherever it was set (never a user name or password)."""
    try:
        url = DashboardSettings().base_url
    except ValueError:  # the settings may be what is wrong: the raw variable, if any
        url = os.environ.get("FLEET_BASE_URL", "")
    from reporting.alert import dashboard_name

    return dashboard_name(url)


def expected_failure(error: BaseException) -> tuple[ExitCode, str] | None:
    """The exit code and the one line for an expected failure; None for anything else (a bug: let it show)."""
    if isinstance(error, DashboardError):
        code = exit_code_for(error)
        if code is ExitCode.UNREACHABLE:
            where = setting_source("FLEET_BASE_URL")
            return code, f"cannot reach the dashboard at {dashboard_host()} ({where}): {error}"
        if code is ExitCode.AUTHENTICATION:
            return code, f"the dashboard at {dashboard_host()} refused {refused_credential(error.path)}: {error}"
        return code, str(error)
    if isinstance(error, PolicyError | NoSiteMatches | SettingsError):
        return ExitCode.CONFIGURATION, str(error)
    if isinstance(error, SitesBrokenByRun):
        return ExitCode.SITES_BROKEN, str(error)
    if isinstance(error, SitesStillDown):
        return ExitCode.SITES_STILL_DOWN, str(error)
    if isinstance(error, NightDidNothing):
        return ExitCode.NOTHING_DONE, str(error)
    if isinstance(error, NightBusy):
        return ExitCode.NIGHT_BUSY, str(error)
    if isinstance(error, ValidationError):  # settings: name the variable and where it was set, never the value
        return ExitCode.CONFIGURATION, settings_problem(error)
    if type(error).__name__ == "ReportDeliveryError":  # reporting is imported only when a report is made
        return ExitCode.NEEDS_ATTENTION, str(error)
    return None


class QuietExpectedErrors(logging.Filter):
    """Drop the traceback Prefect logs for an expected failure; the message line stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], EXPECTED):
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_expected_tracebacks() -> None:
    """Install the filter on the console handlers (Prefect's API handler has sent its copy by then)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, QuietExpectedErrors) for f in handler.filters):
            handler.addFilter(QuietExpectedErrors())
