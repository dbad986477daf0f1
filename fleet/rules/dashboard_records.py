"""What the dashboard's records become for the plan: sites, the updates they offer, their ignore entries."""

from __future__ import annotations

from datetime import UTC

from dashboard import models
from fleet.model.wordpress_version import older
from fleet.rules.plan import DetectedUpdate, IgnoreEntry, SiteRecord, SiteStatus

MINIMUM_CHILD_VERSION = "4.0.0"  # MainWP refuses to sync, list or update a site with an older child plugin
# what MainWP records when an operator disconnects a site (its English words: a dashboard in another language
# records its translation, and such a site is synced and reported disconnected, never reconnected by a night)
MANUALLY_DISCONNECTED = "Manually disconnected"


def child_too_old(version: str | None) -> bool:
    """As MainWP's `check_child_version` compares (`version_compare`); a version not recorded is not judged."""
    return older(version, MINIMUM_CHILD_VERSION)


def site_record(site: models.Site, client_names: dict[int, str]) -> SiteRecord:
    """A dashboard site as the plan sees it; whether it is usable tonight is settled after the sync."""
    status, reason = SiteStatus.online, None
    if site.suspended or site.status == "suspended":
        status, reason = SiteStatus.suspended, "site is suspended on the dashboard"
    elif child_too_old(site.child_version):
        status = SiteStatus.child_too_old
        reason = f"child plugin {site.child_version} is older than {MINIMUM_CHILD_VERSION}"
    elif (site.sync_errors or "").strip() == MANUALLY_DISCONNECTED:  # the operator's decision: never reconnected
        status, reason = SiteStatus.disconnected, "disconnected by hand on the dashboard: reconnect it there to " \
                                                  "have it maintained again"
    return SiteRecord(
        id=site.id,
        url=site.url,
        name=site.name or site.url,
        client=client_names.get(site.client_id) if site.client_id else None,
        tags=sorted(site.tags.values()),
        status=status,
        status_reason=reason,
        last_sync=site.last_sync.replace(tzinfo=site.last_sync.tzinfo or UTC) if site.last_sync else None,
        ip=site.ip or "",
    )


def pending_update(update: models.PendingUpdate) -> DetectedUpdate:
    """A listed update; an empty version is unknown (language packs are listed without a target version)."""
    return DetectedUpdate(
        site_id=update.site_id,
        type=update.type,
        slug=update.slug,
        name=update.name,
        from_version=update.current_version or None,
        to_version=update.new_version or None,
    )


def ignored_update(entry: models.IgnoredUpdate) -> IgnoreEntry:
    """An ignore entry; one without versions ignores them all."""
    return IgnoreEntry(site_id=entry.site_id, type=entry.type, slug=entry.slug, name=entry.name,
                         ignored_version=entry.ignored_version or "all_versions")
