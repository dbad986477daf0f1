"""Before the night: every setting (pipeline, dashboard, mail), the policy file, the dashboard's answer to the
credentials and the selection, checked before the first write, and from the command line before a flow run or a
temporary Prefect server exists. A mistake then costs seconds and one line naming what to fix (exit 2, or 3 for
refused credentials), never a night that applied its updates and then could not send its report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from dashboard.client import DashboardClient
from dashboard.errors import ConfigurationError, NotFound
from dashboard.home import SettingsError, setting_source
from dashboard.settings import DashboardSettings
from fleet.engine.detection import load_fleet
from fleet.engine.night import NightRequest
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Selection
from fleet.rules.plan import check_selection
from fleet.rules.policy import Policy, check_client_names, client_names
from reporting.settings import MailSettings

# A person's mistake, not the night's failure: a run a person started ends with the one line and no alert.


@dataclass(frozen=True)
class CheckedSettings:
    """What the night will run with, every part of it valid."""

    settings: PipelineSettings
    policy: Policy
    policy_path: Path | None  # None: no policy file, every update applies
    mail: MailSettings | None  # None: the night sends no report


def check_settings(
    request: NightRequest, *, dashboard_from_environment: bool, mail: Callable[[], MailSettings] | None
) -> CheckedSettings:
    """The pipeline's settings and the policy file, the dashboard's FLEET_* settings (unless a saved block gives
    them) and, for a night that sends its report, the mail settings (a send over SMTP needs a sender): each bad
    one named with where it was set."""
    settings, policy = request.settings_and_policy()
    try:
        if dashboard_from_environment:
            DashboardSettings()
        return CheckedSettings(settings, policy, request.policy_path(settings), mail() if mail is not None else None)
    except ValidationError as error:
        raise SettingsError.of(error) from None


async def check_dashboard(
    client: DashboardClient, selection: Selection, checked: CheckedSettings | None = None
) -> None:
    """The dashboard answers and takes the credentials (the REST key and, when the Abilities API is used, its
    login), every site, tag and client the selection names exists, and so does every client the policy file
    names; nothing is written. The client is the one FLEET_* configure: a base URL that leads to no MainWP REST
    API is said as that setting's mistake, naming the variable and where it was set."""
    try:
        await client.count_sites()
    except NotFound as error:
        raise ConfigurationError(
            f"{setting_source('FLEET_BASE_URL')}: {client.settings.base_url} leads to no MainWP REST API "
            f"({error}); it is the dashboard's address ending in /wp-json, e.g. https://dash.example.com/wp-json"
        ) from None
    if client.settings.abilities_user or client.settings.abilities_bearer:
        await client.get_ability("list-updates-v1")
    names_clients = checked is not None and bool(client_names(checked.policy))
    if selection.sites or selection.tags or selection.clients or names_clients:
        sites, clients = await load_fleet(client)
        check_selection(sites, selection)
        if checked is not None:
            check_client_names(checked.policy, [known.name for known in clients], checked.policy_path)
