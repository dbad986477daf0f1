"""Which sites' memory of rolled-back versions a night can read: WordPress rolls back only plugins and themes."""

from __future__ import annotations

from collections.abc import Iterable

from dashboard.models import UpdateType
from fleet.rules.plan import DetectedUpdate

ROLLED_BACK_TYPES = (UpdateType.plugin, UpdateType.theme)  # WordPress rolls back only these


def rollback_readable(updates: Iterable[DetectedUpdate], only: frozenset[int] | None = None) -> set[int]:
    """The sites whose rollback memory is read: offered a plugin or theme (and among `only`, when given)."""
    return {update.site_id for update in updates if update.type in ROLLED_BACK_TYPES
            and (only is None or update.site_id in only)}
