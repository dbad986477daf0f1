"""The parameters several flows take, each typed and described once: the Prefect UI's run forms read the
description from here, the same on every flow (a flow's docstring says only what is its own).

Each is a flat `Annotated` type, so a flow keeps its parameter names, defaults and plain values (deployments,
schedules, `fleet` and the forms pass them as they always did). The description goes in as `json_schema_extra`,
not `description=`: Prefect builds each parameter's Field with the `Args:` docstring text or an explicit None,
which overrides an annotated `description=`, while `json_schema_extra` is merged into the schema.

The pickers' types keep `null` (`X | None`, Pydantic's `anyOf` with `{"type": "null"}`, the form Prefect's own
guide to form building uses): the Prefect UI checks a Custom run's values against the deployment's parameter schema
before it sends them (`POST /ui/schemas/validate`, "Validate parameters" on by default), so the default None must
be valid there. The UI then offers None beside the block's picker of saved documents (its definition carries
`block_type_slug`) or beside the date picker (`format: date-time`). Leaving null out of the schema
(`SkipJsonSchema[None]`) showed the bare picker but made the form refuse its own default.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, TypeAlias

from prefect_email import EmailServerCredentials
from pydantic import Field
from pydantic.fields import FieldInfo

from dashboard.block import DashboardConnection
from fleet.model.summary import Selection


def described(text: str) -> FieldInfo:
    """A parameter's description that Prefect's schema keeps (see the module's docstring)."""
    return Field(json_schema_extra={"description": text})


FleetSelection: TypeAlias = Annotated[Selection, described(
    "Which sites (ids or domains), tags, clients and update types; empty lists mean all.")]
DryRun: TypeAlias = Annotated[bool, described(
    "Plan only: read the dashboard, write the plan and the summary, send no write request.")]
PolicyFile: TypeAlias = Annotated[str, described(
    "Policy file (YAML or TOML); empty means FLEET_POLICY_FILE, or apply everything.")]
ReportDir: TypeAlias = Annotated[str, described(
    "Where the run directory goes; empty means FLEET_REPORT_DIR.")]
SavedDashboard: TypeAlias = Annotated[DashboardConnection | None, described(
    "A saved Dashboard Connection block; none chosen means the FLEET_* environment.")]
SendReport: TypeAlias = Annotated[bool, described(
    "E-mail the reports to the operator and the clients (a dry run: to the operator only).")]
SavedEmailServer: TypeAlias = Annotated[EmailServerCredentials | None, described(
    "A saved prefect-email Email Server Credentials block; none chosen means FLEET_SMTP_*.")]
PlanMoment: TypeAlias = Annotated[datetime | None, described(
    "Dry runs only: plan as if it were this moment (rehearse windows and blackouts); empty means now.")]
LockWaitSeconds: TypeAlias = Annotated[float, described(
    "How long to wait for a dashboard's night lock another run holds before leaving that dashboard to it.")]
DashboardNames: TypeAlias = Annotated[list[str] | None, described(
    "Names of saved Dashboard Connection blocks; empty means every saved one.")]
DashboardEnvironments: TypeAlias = Annotated[dict[str, dict[str, str]] | None, described(
    "Extra variables for one dashboard's run, by block name (its policy file, recipients, feed...).")]
DashboardDeployment: TypeAlias = Annotated[str, described(
    "The deployment each dashboard's run runs as (`flow name/deployment name`).")]
