"""The service's home: one directory, not the working directory, for its settings (`.env`) and its memory (the
state database, the reports), so that a terminal, `fleet serve`, a cron job and a worker all see the same holds.

`FLEET_HOME` names it (from the environment or a `.env` in the working directory); by default it is the user's
state directory, `$XDG_STATE_HOME/fleet-maintenance` (`~/.local/state/fleet-maintenance`). Settings come from the
environment first, then `.env` in the working directory, then `.env` in the home. It lives in the lowest room
because every settings class, the client's included, reads its `.env`.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Collection
from pathlib import Path

from dotenv import dotenv_values
from pydantic import ValidationError
from pydantic_settings import BaseSettings, DotEnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

PREFIX = "FLEET_"
_DEFAULT_ENV_FILE = ".env"  # the class default, replaced by env_files() when the settings are read


def fleet_home() -> Path:
    """FLEET_HOME, else the user's state directory; absolute, whatever the working directory."""
    named = os.environ.get("FLEET_HOME") or _working_env().get("FLEET_HOME")
    if named:
        return Path(named).expanduser().resolve()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).expanduser().resolve() / "fleet-maintenance"


def env_files() -> list[Path]:
    """The `.env` files settings are read from, weakest first: the home's, then the working directory's."""
    files = [fleet_home() / ".env", Path.cwd() / ".env"]
    return [path for index, path in enumerate(files) if path not in files[:index]]


def setting_source(variable: str) -> str:
    """Where a FLEET_* variable's value came from, for an error that has to say which line to fix."""
    if variable in os.environ:
        return f"{variable} (environment)"
    for path in reversed(env_files()):  # the strongest file first
        if path.is_file() and variable in dotenv_values(path):
            return f"{variable} in {path}"
    looked = " or ".join(f"{path}" + ("" if path.is_file() else " (no such file)") for path in env_files())
    return f"{variable} (not set: not in the environment, nor in {looked})"


def present_variables() -> dict[str, str]:
    """Every FLEET_* name given, in the environment or a `.env` file of `env_files()`, and where (the strongest)."""
    found = {name: f"{name} (environment)" for name in os.environ if name.startswith(PREFIX)}
    for path in reversed(env_files()):
        if path.is_file():
            for name in dotenv_values(path):
                if name.startswith(PREFIX):
                    found.setdefault(name, f"{name} in {path}")
    return found


def unknown_variables(known: Collection[str]) -> list[str]:
    """One line per FLEET_* name given that no setting reads (a typo is otherwise silently ignored: FLEET_SMTP_HOTS
    leaves the mail unset, and the reports quietly become `.eml` files), with the nearest known name."""
    lines = []
    for name, where in sorted(present_variables().items()):
        if name in known:
            continue
        nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f"did you mean {nearest[0]}?" if nearest else "no setting has that name (README, Configuration)"
        lines.append(f"{where}: not a setting: {hint}")
    return lines


def refused_credential(call_path: str | None) -> str:
    """Which setting holds the credentials the dashboard refused on a call, and where it was set: the Abilities
    API's login or the REST API key."""
    if "wp-abilities" in (call_path or ""):
        return (f"the application password {setting_source('FLEET_ABILITIES_PASSWORD')} of "
                f"{setting_source('FLEET_ABILITIES_USER')}")
    return f"the REST API key {setting_source('FLEET_API_KEY')}"


def variable_for(field: str) -> str:
    """The FLEET_* variable of a settings field: `base_url` -> `FLEET_BASE_URL`."""
    return PREFIX + field.upper()


class FleetSettings(BaseSettings):
    """FLEET_* settings read from the environment and the `.env` files of `env_files()`, found when the settings
    are read (FLEET_HOME may change after import); `_env_file=None` still reads the environment only."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_file=_DEFAULT_ENV_FILE, extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        if isinstance(dotenv_settings, DotEnvSettingsSource) and dotenv_settings.env_file == _DEFAULT_ENV_FILE:
            dotenv_settings = DotEnvSettingsSource(settings_cls, env_file=env_files())
        return init_settings, env_settings, dotenv_settings, file_secret_settings


def _working_env() -> dict[str, str | None]:
    path = Path.cwd() / ".env"
    return dotenv_values(path) if path.is_file() else {}


def settings_problem(error: ValidationError, block: str | None = None) -> str:
    """One line per bad setting that names the FLEET_* variable and where it was set (or the block's field),
    never its value: a URL's password or a key would land in a log."""
    parts = []
    for problem in error.errors():
        field = ".".join(str(part) for part in problem["loc"])
        if not field:
            where = block or "settings"
        elif block:
            where = f"{block}: {field}"
        else:
            where = setting_source(variable_for(str(problem["loc"][0])))
        parts.append(f"{where}: {problem['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


class SettingsError(ValueError):
    """FLEET_* settings that cannot be used: the one line of `settings_problem`, naming each variable and where it
    was set (exit 2)."""

    @classmethod
    def of(cls, error: ValidationError, block: str | None = None) -> SettingsError:
        return cls(settings_problem(error, block))
