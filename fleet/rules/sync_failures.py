"""What a failed sync says about a site, and what the night does with it."""

from __future__ import annotations

from typing import NamedTuple

from fleet.rules.plan import SiteRecord, SiteStatus, status_for_error


class SyncFailure(NamedTuple):
    """Why a site's sync failed: the dashboard's error code (or the pipeline's own, `sync_unknown`, ...) and a
    message for the report."""

    code: str
    message: str


SyncFailures = dict[int, SyncFailure]  # by site id


def apply_sync_failures(sites: list[SiteRecord], failures: SyncFailures) -> list[SiteRecord]:
    """Mark the sites whose sync failed as offline, disconnected or too old, with the dashboard's message."""
    updated = []
    for site in sites:
        if site.status is SiteStatus.online and site.id in failures:
            code, message = failures[site.id]
            status, reason = status_for_error(code), f"sync failed: {message}"
            site = site.model_copy(update={"status": status, "status_reason": reason})
        updated.append(site)
    return updated


def known_offline(failures: SyncFailures) -> list[int]:
    """The sites a sync was refused for because the dashboard keeps them as known offline."""
    return [site_id for site_id, (code, _) in failures.items() if code.endswith("site_offline")]


def version_lost(failures: SyncFailures) -> list[int]:
    """The sites a sync was refused for as having a MainWP Child older than 4.0.0. Only sites whose record shows
    4.0.0 or newer are synced (`fleet.rules.dashboard_records`): for these, the dashboard's sync record of the
    version was lost, as MainWP sets it to 0 on every failed sync, and only a reconnect records it again."""
    return [site_id for site_id, (code, _) in failures.items() if code.endswith("child_outdated")]


def refused(failures: SyncFailures) -> bool:
    """A sync was refused for what a failed sync left on the dashboard's records (known offline, the version lost):
    a site repaired since can be brought back."""
    return bool(known_offline(failures) or version_lost(failures))


def refused_since_a_failed_sync(error: object) -> str:
    """Why the dashboard refuses a site as "child outdated" although its child is not old: a sync of it failed,
    which on MainWP leaves its record of the MainWP Child at 0 until the site is reconnected."""
    return (f"the dashboard refuses every call on the site since a sync of it failed ({error}); a night reconnects "
            "it once its pages and MainWP Child answer again")
