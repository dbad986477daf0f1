"""The optional pickers of the flows' run forms, typed in one place: a saved block, or a moment, or None.

The Prefect UI checks a Custom run's values against the deployment's parameter schema before it sends them
(`POST /ui/schemas/validate`, "Validate parameters" on by default), so the default None must be valid there:
each type keeps `null` (`X | None`, Pydantic's `anyOf` with `{"type": "null"}`, the form Prefect's own guide to
form building uses). The UI then offers None beside the block's picker of saved documents (its definition
carries `block_type_slug`) or beside the date picker (`format: date-time`). Leaving null out of the schema
(`SkipJsonSchema[None]`) showed the bare picker but made the form refuse its own default.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeAlias

from prefect_email import EmailServerCredentials

from dashboard.block import DashboardConnection

SavedDashboard: TypeAlias = DashboardConnection | None
"""A saved Dashboard Connection block; None means the FLEET_* environment."""

SavedEmailServer: TypeAlias = EmailServerCredentials | None
"""A saved prefect-email Email Server Credentials block; None means FLEET_SMTP_*."""

PlanMoment: TypeAlias = datetime | None
"""The moment a run plans as if it were (windows, blackouts); None means now."""
