"""The objects abilities print (the formatters of the dashboard's abilities util): typed values, ISO dates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from emulator.records import Client, Cost, Item, Site, Tag

if TYPE_CHECKING:
    from emulator.operations import ItemResult
    from emulator.state import FleetState, PendingUpdate

TYPE_OUT = {"wp": "core", "plugin": "plugin", "theme": "theme", "translation": "translation"}
TYPE_IN = {"core": "wp", "plugins": "plugin", "themes": "theme", "translations": "translation"}
ALL_TYPES = ("core", "plugins", "themes", "translations")


def iso_c(timestamp: float | None) -> str | None:
    """PHP's `date('c')`: `2026-11-21T10:21:24+00:00`, or None for "never"."""
    if not timestamp:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


def site_status(site: Site) -> str:
    """Abilities count a site known offline as disconnected (REST v2 does not)."""
    if site.suspended:
        return "suspended"
    if site.offline_check_result == -1 or site.sync_errors:
        return "disconnected"
    return "connected"


def site_ref(site: Site) -> dict[str, Any]:
    return {"id": site.id, "url": site.url, "name": site.name}


def site_basic(site: Site) -> dict[str, Any]:
    name = site.name.removeprefix("https://").removeprefix("http://")
    return {"id": site.id, "url": site.url, "name": name, "status": site_status(site),
            "client_id": site.client_id or None}


def site_full(state: FleetState, site: Site, include_stats: bool = False) -> dict[str, Any]:
    full = site_basic(site) | {
        "admin_username": site.admin,
        "wp_version": site.known_wp_version or site.wp_version,
        "php_version": site.php_version,
        "child_version": site.synced_child_version,  # `$site->version`: the sync record, "0" after a failed sync
        "last_sync": iso_c(site.last_sync),
        "notes": site.note,
    }
    if include_stats:
        pending = state.pending_updates(site)
        full["stats"] = {
            "plugin_updates": sum(1 for u in pending if u.type == "plugin"),
            "theme_updates": sum(1 for u in pending if u.type == "theme"),
            "wp_update_available": any(u.type == "wp" for u in pending),
            "health_score": site.health_score,
        }
    return full


def client_view(client: Client) -> dict[str, Any]:
    return {
        "id": client.id, "name": client.name, "email": client.client_email, "phone": client.client_phone,
        "address_1": client.address_1, "address_2": client.address_2, "city": client.city, "state": client.state,
        "zip": client.zip, "country": client.country, "note": client.note, "suspended": int(client.suspended),
        "created": iso_c(client.created), "facebook": client.client_facebook, "twitter": client.client_twitter,
        "instagram": client.client_instagram, "linkedin": client.client_linkedin,
    }


def tag_view(state: FleetState, tag: Tag) -> dict[str, Any]:
    site_ids = state.tag_site_ids(tag.id)
    return {"id": tag.id, "name": tag.name, "color": tag.color or None, "sites_count": len(site_ids),
            "sites_ids": site_ids}


def cost_view(cost: Cost) -> dict[str, Any]:
    return {"id": cost.id, "name": cost.name, "type": cost.type, "price": float(cost.price),
            "renewal_type": cost.renewal_type, "payment_method": cost.payment_method,
            "product_type": cost.product_type, "last_renewal": iso_c(cost.last_renewal),
            "next_renewal": iso_c(cost.next_renewal)}


def item_view(item: Item) -> dict[str, Any]:
    """Plugin or theme as the dashboard stored it at the last sync."""
    offer = item.known_offer
    return {"slug": item.slug, "name": item.name, "version": item.known_version or item.version,
            "active": bool(item.active), "has_update": offer is not None, "update_version": offer}


def update_view(update: PendingUpdate) -> dict[str, Any]:
    return {"site_id": update.site_id, "site_url": update.site_url, "site_name": update.site_name,
            "type": TYPE_OUT[update.type], "slug": update.slug, "name": update.name,
            "current_version": update.current_version, "new_version": update.new_version}


def done_view(site: Site, result: ItemResult) -> dict[str, Any]:
    return {"site_id": site.id, "site_url": site.url, "site_name": site.name, "type": TYPE_OUT[result.type],
            "slug": result.slug, "name": result.name, "old_version": result.old_version,
            "new_version": result.new_version}


def update_error(site: Site, item_type: str, slug: str, code: str, message: str) -> dict[str, Any]:
    return {"site_id": site.id, "site_url": site.url, "site_name": site.name, "type": item_type, "slug": slug,
            "code": code, "message": message}


def resolution_error(failure: dict[str, Any]) -> dict[str, Any]:
    """A site that could not be resolved, as update outputs list it."""
    return {"site_id": 0, "site_url": str(failure["identifier"]), "type": "site", "slug": "",
            "code": failure["code"], "message": failure["message"]}
