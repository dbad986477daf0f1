"""Every FLEET_* name the project reads, so that a command can name one it does not before any work: a typo in a
`.env` is otherwise ignored without a word (`FLEET_SMTP_HOTS`: the mail stays unset and the reports quietly
become `.eml` files).

The names are the fields of every settings class (`dashboard.home.FleetSettings` and its subclasses) and the few
read outside one. The service's settings load Prefect, so they are imported only to judge a name the others do
not know: a command given only known names pays nothing for them.
"""

from __future__ import annotations

import importlib

from dashboard.home import FleetSettings, SettingsError, unknown_variables, variable_for

SETTINGS_MODULES = ("dashboard.settings", "fleet.model.settings", "guard.settings", "reporting.settings",
                    "vulnfeed.settings")
SERVICE_SETTINGS_MODULES = ("deployments.automations", "deployments.serve")
READ_ELSEWHERE = frozenset({
    "FLEET_HOME",  # dashboard.home: where the `.env` files and the memory are
    "FLEET_REPOSITORY",  # prefect.yaml: the repository a work pool's worker clones
    "FLEET_REFERENCE_DIR",  # tests/reference: another copy of the captured exchanges
})


def known_names(modules: tuple[str, ...] = SETTINGS_MODULES) -> set[str]:
    """The FLEET_* names of every settings class defined by `modules` (and any loaded before)."""
    for module in modules:
        importlib.import_module(module)
    classes, found = [FleetSettings], set(READ_ELSEWHERE)
    while classes:
        settings = classes.pop()
        classes += settings.__subclasses__()
        found |= {variable_for(field) for field in settings.model_fields}
    return found


def check_setting_names() -> None:
    """Raise `SettingsError` naming each FLEET_* name in the environment or a `.env` that no setting reads, with the
    nearest known name."""
    if not unknown_variables(known_names()):
        return
    problems = unknown_variables(known_names(SETTINGS_MODULES + SERVICE_SETTINGS_MODULES))
    if problems:
        raise SettingsError("; ".join(problems))
