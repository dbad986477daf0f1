"""How the dashboard's REST v2 writes its records: raw database strings, JSON-encoded string fields,
tags keyed by id, times without a zone. Shared by every family, the batch routes and legacy v1."""

from __future__ import annotations

import json
import time
from typing import Any

from emulator.auth import PERMISSION_LABELS
from emulator.hosting import site_ip
from emulator.records import ApiKey, Client, Cost, Heartbeat, Item, Monitor, Site, Tag
from emulator.state import FleetState

HTTP_REASONS = {
    0: "",
    200: "OK",
    301: "Moved Permanently",
    403: "Forbidden",
    404: "Not Found",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def wp_time(timestamp: float | None) -> str:
    """`Y-m-d\\TH:i:s` in UTC, no zone: how v2 writes `last_sync` and friends."""
    return "" if not timestamp else time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(timestamp))


def db_time(timestamp: float | None) -> str:
    return "" if not timestamp else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp))


def zulu_time(timestamp: float | None) -> str:
    return "" if not timestamp else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def site_simple(site: Site) -> dict[str, str]:
    return {"id": str(site.id), "name": site.name, "url": site.url, "client_id": str(site.client_id)}


def site_tags(state: FleetState, site: Site) -> dict[str, str] | list[Any]:
    tags = {str(t): state.tags[t].name for t in site.tag_ids if t in state.tags}
    return tags or []


def plugin_upgrades(site: Site) -> dict[str, Any]:
    return {
        item.slug: {
            "Name": item.name,
            "Version": item.known_version,
            "active": int(item.active),
            "update": {
                "slug": item.slug.split("/")[0],
                "plugin": item.slug,
                "new_version": item.known_offer,
                "package": "",
            },
        }
        for item in site.plugins.values()
        if item.known_offer is not None
    }


def theme_upgrades(site: Site) -> dict[str, Any]:
    return {
        item.slug: {
            "update": {"theme": item.slug, "new_version": item.known_offer, "package": ""},
            "Name": item.name,
            "Version": item.known_version,
            "active": int(item.active),
        }
        for item in site.themes.values()
        if item.known_offer is not None
    }


def translation_upgrades(site: Site) -> list[dict[str, Any]]:
    return [
        {"type": "plugin", "slug": item.slug, "language": "de_DE", "version": item.known_version, "name": item.name}
        for item in site.translations.values()
        if item.known_offer is not None
    ]


def wp_upgrades(site: Site) -> dict[str, str] | list[Any]:
    return {"current": site.known_wp_version, "new": site.known_wp_offer} if site.known_wp_offer else []


def _ignored(mapping: dict[str, list[str]], site: Site, plugins: bool) -> str:
    if not mapping:
        return ""
    items = site.plugins if plugins else site.themes
    return compact(
        {
            slug: {"Name": items[slug].name if slug in items else slug, "ignored_versions": versions}
            for slug, versions in mapping.items()
        }
    )


def _active_theme(site: Site) -> str:
    theme = next((t for t in site.themes.values() if t.active), None)
    return f"{theme.name} {theme.version}" if theme else ""


def _plugin_list(items: dict[str, Item]) -> str:
    return compact(
        [
            {
                "mainwp": "F",
                "name": i.name,
                "slug": i.slug,
                "description": "",
                "version": i.known_version or i.version,
                "active": int(i.active),
            }
            for i in items.values()
        ]
    )


def _theme_list(items: dict[str, Item]) -> str:
    return compact(
        [
            {
                "name": i.name,
                "title": i.name,
                "description": "",
                "version": i.known_version or i.version,
                "active": int(i.active),
                "slug": i.slug,
                "parent_active": 0,
            }
            for i in items.values()
        ]
    )


def _recent(site: Site, post_type: str) -> str:
    return compact(
        [
            {
                "id": p.id,
                "post_type": p.post_type,
                "status": p.status,
                "title": p.title,
                "comment_count": "0",
                "dts": int(p.date),
                "author": p.author,
                "authorEmail": f"{p.author}@{site.domain}",
                "categories": "",
                "tags": "",
            }
            for p in site.posts
            if p.post_type == post_type
        ]
    )


def site_view(state: FleetState, site: Site, *, empty_tags: Any = None) -> dict[str, Any]:
    """The full `view` record; every value a string as in the database, list fields JSON-encoded.
    The encoding is cached per site until the site is saved again; tag names are read live."""
    tags = site_tags(state, site)
    if not tags and empty_tags is not None:
        tags = empty_tags
    encoded = state.view_cache.get(site.id)
    if encoded is None:
        encoded = state.view_cache[site.id] = _encode_site(state, site)
    view = dict(encoded)
    view["tags"] = tags
    return view


def _encode_site(state: FleetState, site: Site) -> dict[str, Any]:
    http_status = f"{site.http_code} - {HTTP_REASONS.get(site.http_code, '')}".rstrip(" -") if site.http_code else "0"
    return {
        "id": str(site.id),
        "name": site.name,
        "url": site.url,
        "tags": None,
        "note": site.note,
        "ip": site_ip(state.config.seed, site.id),
        "client_id": str(site.client_id),
        "is_staging": "0",
        "wp_version": site.known_wp_version or site.wp_version,
        "php_version": site.php_version,
        "child_version": site.child_version,
        "mysql_version": site.mysql_version,
        "memory_limit": site.memory_limit,
        "database_size": str(site.database_size),
        "active_theme": _active_theme(site),
        "status": state.site_status(site),
        "sync_errors": site.sync_errors,
        "http_status": http_status,
        "health_status": "0",
        "health_score": str(site.health_score),
        "icon": "",
        "last_sync": wp_time(site.last_sync),
        "plugins": _plugin_list(site.plugins),
        "themes": _theme_list(site.themes),
        "last_post_time": str(int(max((p.date for p in site.posts), default=0))),
        "recent_posts": _recent(site, "post"),
        "recent_pages": _recent(site, "page"),
        "recent_comments": "[]",
        "categories": compact(
            [{"term_id": 1, "name": "Uncategorized", "slug": "uncategorized", "taxonomy": "category", "parent": 0}]
        ),
        "wp_upgrades": compact(wp_upgrades(site)),
        "plugin_upgrades": compact(plugin_upgrades(site) or []),
        "premium_upgrades": "",
        "theme_upgrades": compact(theme_upgrades(site) or []),
        "translation_upgrades": compact(translation_upgrades(site)),
        "ignored_plugins": _ignored(site.ignored_plugins, site, True),
        "ignored_themes": _ignored(site.ignored_themes, site, False),
        "is_ignoreCoreUpdates": str(int(site.ignore_core_updates)),
        "is_ignorePluginUpdates": str(int(site.ignore_plugin_updates)),
        "is_ignoreThemeUpdates": str(int(site.ignore_theme_updates)),
        "verify_certificate": "1",
        "force_use_ipv4": "0",
        "ssl_version": "0",
        "suspended": str(int(site.suspended)),
    }


def tag_view(state: FleetState, tag: Tag, *, after_write: bool = False) -> dict[str, Any]:
    """Lists and creates give `count_sites` and `sites_ids` (null when none); edit and remove give ""."""
    if after_write:
        return {"id": str(tag.id), "name": tag.name, "color": tag.color, "count_sites": "", "sites_ids": ""}
    ids = state.tag_site_ids(tag.id)
    return {
        "id": str(tag.id),
        "name": tag.name,
        "color": tag.color,
        "count_sites": str(len(ids)),
        "sites_ids": ",".join(map(str, ids)) or None,
    }


CLIENT_SIMPLE = ("name", "address_1", "address_2", "city", "zip", "state", "country", "client_email", "client_phone")
CLIENT_SOCIAL = ("client_facebook", "client_twitter", "client_instagram", "client_linkedin")


def client_view(client: Client, *, simple: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {"id": str(client.id)}
    for name in CLIENT_SIMPLE[:7]:
        record[name] = getattr(client, name)
    if not simple:
        record["note"] = client.note
    record["client_email"], record["client_phone"] = client.client_email, client.client_phone
    if not simple:
        for name in CLIENT_SOCIAL:
            record[name] = getattr(client, name)
    record["created"] = wp_time(client.created)
    record["suspended"] = str(client.suspended)
    if not simple:
        record["primary_contact_id"] = "0"
    return record


def client_row(client: Client) -> dict[str, Any]:
    """The raw joined row `/sites/{id}/client` returns."""
    row: dict[str, Any] = {"client_id": str(client.id), "image": ""}
    for name in CLIENT_SIMPLE[:7]:
        row[name] = getattr(client, name)
    row.update(
        {
            "note": client.note,
            "selected_icon_info": "",
            "client_email": client.client_email,
            "client_phone": client.client_phone,
        }
    )
    for name in CLIENT_SOCIAL:
        row[name] = getattr(client, name)
    row.update({"created": str(int(client.created)), "suspended": str(client.suspended), "primary_contact_id": "0"})
    for name in (
        "contact_id",
        "contact_client_id",
        "contact_email",
        "contact_image",
        "contact_icon_info",
        "contact_name",
        "contact_phone",
        "contact_role",
        "facebook",
        "twitter",
        "instagram",
        "linkedin",
    ):
        row[name] = None
    return row


def key_view(key: ApiKey) -> dict[str, Any]:
    return {
        "id": str(key.key_id),
        "user_id": str(key.user_id),
        "version": "v2",
        "description": key.description,
        "permissions": [p.replace("&", "&amp;") for p in PERMISSION_LABELS[key.permissions]],
        "truncated_key": key.truncated_key,
        "active": key.enabled,
        "last_access": db_time(key.last_access),
    }


def cost_view(cost: Cost) -> dict[str, Any]:
    return {
        "id": cost.id,
        "name": cost.name,
        "url": cost.url,
        "type": cost.type,
        "product_type": cost.product_type,
        "slug": cost.slug,
        "license_type": cost.license_type,
        "cost_status": cost.cost_status,
        "payment_method": cost.payment_method,
        "price": f"{cost.price:.2f}",
        "renewal_type": cost.renewal_type,
        "last_renewal": str(int(cost.last_renewal)),
        "next_renewal": str(int(cost.next_renewal)),
        "last_alert": 0,
        "sites": compact(cost.sites),
        "groups": compact(cost.groups),
        "clients": compact(cost.clients),
        "note": cost.note,
    }


def uptime_24h(now: float) -> list[dict[str, int]]:
    top = int(now // 3600) * 3600
    return [{"timestamp": top - (23 - i) * 3600, "status": 0} for i in range(24)]


def monitor_view(site: Site, monitor: Monitor, now: float, *, with_name: bool = False) -> dict[str, Any]:
    beats = monitor.heartbeats
    pings = [b.ping_ms for b in beats] or [0]
    up = sum(1 for b in beats if b.status == 1)
    ratio = round(100.0 * up / len(beats), 6) if beats else 0
    record: dict[str, Any] = {"id": monitor.id}
    if with_name:
        record["name"] = site.name
    record.update(
        {
            "url": site.url,
            "type": monitor.type if monitor.type != "useglobal" else "http",
            "last_status": monitor.last_status,
            "check_frequency": f"{monitor.interval}m",
            "last_check_at": db_time(monitor.last_check_at),
            "last_status_code": monitor.last_status_code if monitor.last_status_code is not None else "",
            "uptime_24h": uptime_24h(now),
            "uptime_ratio_7d": ratio,
            "uptime_ratio_30d": ratio,
            "incidents_count_7d": 0,
            "incidents_count_30d": 0,
            "response_time_avg_ms": int(sum(pings) / len(pings)),
            "response_time_min_ms": min(pings),
            "response_time_max_ms": max(pings),
        }
    )
    if with_name:
        record["heartbeats"] = [heartbeat_row(monitor.id, b) for b in beats]
    return record


def heartbeat_row(monitor_id: int, beat: Heartbeat) -> dict[str, str]:
    """Heartbeats embedded in `/monitors/{id}` are raw DB strings."""
    return {
        "heartbeat_id": str(beat.heartbeat_id),
        "monitor_id": str(monitor_id),
        "msg": beat.msg,
        "importance": str(beat.importance),
        "status": str(beat.status),
        "time": db_time(beat.time),
        "ping_ms": str(beat.ping_ms),
        "duration": str(beat.duration),
        "down_count": str(beat.down_count),
        "http_code": str(beat.http_code),
    }


def heartbeat_view(monitor_id: int, beat: Heartbeat) -> dict[str, Any]:
    return {
        "monitor_id": monitor_id,
        "heartbeat_id": beat.heartbeat_id,
        "status": beat.status,
        "msg": beat.msg,
        "importance": beat.importance,
        "time": zulu_time(beat.time),
        "ping_ms": beat.ping_ms,
        "http_code": beat.http_code,
    }
