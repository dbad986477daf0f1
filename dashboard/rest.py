"""REST API v2 and legacy v1 methods, with the parsers that turn each route's answer into models.

Routes follow the real dashboard where it differs from the spec: per-site updates are
`/updates/{id}/update/{type}`, a tag is deleted with `DELETE /tags/{id}/remove`, `add-key` takes a form body
and `edit-key` a JSON body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from dashboard.connection import Connection, parse
from dashboard.errors import ActionFailed, InvalidInput, PermissionDenied, SiteNotFound
from dashboard.models import (
    ActionMessage,
    ApiKey,
    Client,
    ConnectionLimits,
    Heartbeat,
    Incident,
    Monitor,
    MonitorCheck,
    NewApiKey,
    RolledBackUpdate,
    Site,
    SiteCheck,
    SiteItemsUpdate,
    SitePlugin,
    Tag,
    UpdateType,
    rolled_back_updates,
    update_type_of,
    valid_rows,
)
from dashboard.pagination import Page, collect_pages

SETTINGS_CATEGORIES = ("general", "advanced", "monitoring", "cost-tracker", "dashboard-insights", "tools")
SITE_STATUSES = ("any", "connected", "disconnected", "suspended", "available_update")
KEY_PERMISSIONS = ("read", "write")
REST_PAGE_SIZE = 100  # /sites answers 500 above 100 (it pages through list-sites-v1)
MONITOR_PAGE_SIZE = 200
KEY_PAGE_SIZE = 200
_UPDATE_ROUTE = {
    UpdateType.plugin: "plugins",
    UpdateType.theme: "themes",
    UpdateType.translation: "translations",
    UpdateType.core: "wp",
}


def segment(value: int | str, what: str) -> str:
    """A path segment from a caller's id or domain, refusing what would change the path."""
    text = str(value).strip()
    if not text or "/" in text or text in (".", ".."):
        raise InvalidInput(f"invalid {what}: {value!r}", code="client_validation")
    return quote(text, safe="@.:-_")


# ---------------------------------------------------------------- parsers (one per answer shape)


def rows(data: Any) -> list[Any]:
    """A REST list body: a list, an object keyed by id, or `[]`/`""` for none."""
    if isinstance(data, dict):
        return list(data.values())
    if isinstance(data, list):
        return data
    if data in ("", None):
        return []
    raise ValueError(f"expected a list or an object keyed by id, got {type(data).__name__}")


def site_page(body: Any) -> Page[Site]:
    return Page(valid_rows(Site, rows(body["data"])), _total(body))


def site_of(body: Any) -> Site:
    return Site.model_validate(body["data"])


def sites_keyed(body: Any) -> list[Site]:
    """`/sites/sync`, `/sites/check` (`{total, data:{id:{result,...site}}}`) and v1 `all-sites` (keyed by id)."""
    data = body.get("data", body) if isinstance(body, dict) and "total" in body else body
    return valid_rows(Site, [row for row in rows(data) if isinstance(row, dict)])


def count_of(body: Any) -> int:
    return int(body["count"] if "count" in body else body["total"])


def site_check(body: Any) -> SiteCheck:
    return SiteCheck.model_validate(body["data"])


def plugin_list(body: Any) -> list[SitePlugin]:
    return valid_rows(SitePlugin, rows(body["data"]))


def tag_page(body: Any) -> Page[Tag]:
    return Page(valid_rows(Tag, rows(body["data"])), _total(body))


def tag_of(body: Any) -> Tag:
    return Tag.model_validate(body["data"])


def client_page(body: Any) -> Page[Client]:
    return Page(valid_rows(Client, rows(body["data"])), _total(body))


def client_of(body: Any) -> Client:
    return Client.model_validate(body["data"])


def monitor_page(body: Any) -> Page[Monitor]:
    return Page(valid_rows(Monitor, rows(body["data"])), _total(body))


def monitor_of(body: Any) -> Monitor:
    return Monitor.model_validate(body["data"])


def heartbeats(body: Any) -> list[Heartbeat]:
    return valid_rows(Heartbeat, rows(body["data"]))


def incidents(body: Any) -> list[Incident]:
    data = body["data"] if isinstance(body, dict) else body
    return valid_rows(Incident, rows(data))


def monitor_check(body: Any) -> MonitorCheck:
    return MonitorCheck.model_validate(body["data"])


def key_page(body: Any) -> Page[ApiKey]:
    return Page(valid_rows(ApiKey, rows(body["data"])), _total(body))


def new_key(body: Any) -> NewApiKey:
    return NewApiKey.model_validate(body)


def action_message(body: Any) -> ActionMessage:
    return ActionMessage.model_validate(body)


def settings_of(body: Any) -> dict[str, Any]:
    data = body["data"]
    return dict(data) if isinstance(data, dict) else {}


def batch_answer(body: Any) -> dict[str, Any]:
    """`/batch` answers `{family: {action: [...]}}`, or `[]` for an empty batch."""
    if body in ([], None):
        return {}
    if not isinstance(body, dict):
        raise ValueError("expected an object keyed by family")
    return body


def _total(body: dict[str, Any]) -> int | None:
    total = body.get("total")
    try:
        return int(total) if total not in (None, "") else None
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- methods


class RestMethods(Connection):
    """REST API v2 (bearer key) and legacy v1 (consumer key and secret)."""

    # sites

    async def list_sites(self, *, status: str | None = None, search: str | None = None) -> list[Site]:
        """Every site (all pages)."""
        if status is not None and status not in SITE_STATUSES:
            raise InvalidInput(f"invalid site status {status!r}; one of {', '.join(SITE_STATUSES)}",
                               code="client_validation")

        async def page(number: int, size: int) -> Page[Site]:
            answer = await self._rest("GET", "/sites", params={"page": number, "per_page": size, "status": status,
                                                               "search": search})
            return parse(answer, site_page)

        return await collect_pages(page, per_page=REST_PAGE_SIZE, what="sites")

    async def get_site(self, id_or_domain: int | str) -> Site:
        """One site by id or domain.

        On 6.1.2 an unknown id answers 500 `ability_invalid_permissions` (the route goes through
        get-site-v1); an authenticated key can only get that for a site it cannot see, so it is reported
        as `SiteNotFound`.
        """
        route = f"/sites/{segment(id_or_domain, 'site id or domain')}"
        try:
            answer = await self._rest("GET", route)
        except PermissionDenied as exc:
            if exc.code == "ability_invalid_permissions":
                raise SiteNotFound(
                    f"site {id_or_domain} not found (the dashboard answered {exc.code})",
                    code=exc.code, status=exc.status, method=exc.method, path=exc.path,
                ) from None
            raise
        return parse(answer, site_of)

    async def count_sites(self) -> int:
        return parse(await self._rest("GET", "/sites/count"), count_of)

    async def sync_site(self, id_or_domain: int | str) -> Site:
        """Sync one site now; the answer is the site as the dashboard now stores it."""
        route = f"/sites/{segment(id_or_domain, 'site id or domain')}/sync"
        return parse(await self._rest("POST", route, idempotent=True), site_of)

    async def check_site(self, id_or_domain: int | str) -> SiteCheck:
        route = f"/sites/{segment(id_or_domain, 'site id or domain')}/check"
        return parse(await self._rest("POST", route, idempotent=True), site_check)

    async def reconnect_site(self, id_or_domain: int | str) -> Site:
        route = f"/sites/{segment(id_or_domain, 'site id or domain')}/reconnect"
        return parse(await self._rest("POST", route, idempotent=True), site_of)

    async def site_plugins(self, id_or_domain: int | str) -> list[SitePlugin]:
        route = f"/sites/{segment(id_or_domain, 'site id or domain')}/plugins"
        return parse(await self._rest("GET", route), plugin_list)

    async def site_themes(self, id_or_domain: int | str) -> list[SitePlugin]:
        route = f"/sites/{segment(id_or_domain, 'site id or domain')}/themes"
        return parse(await self._rest("GET", route), plugin_list)

    # updates (per site, REST)

    async def rolled_back_updates(self, id_or_domain: int | str) -> list[RolledBackUpdate]:
        """The versions MainWP remembers WordPress rolled back on one site (its update detail, `GET /updates/{id}`;
        the ability `get-site-updates-v1` fails its own output schema on the same data)."""
        route = f"/updates/{segment(id_or_domain, 'site id or domain')}"
        return parse(await self._rest("GET", route), lambda body: rolled_back_updates(body["data"]))

    async def update_site_items(
        self, site_id: int | str, update_type: UpdateType | str, slugs: Sequence[str]
    ) -> SiteItemsUpdate:
        """Update the named items of one site through its REST route and report each item.

        Only the named slugs are touched (the route updates nothing without them). Never retried: an
        answer lost in transit raises `OutcomeUnknown`, and the caller re-syncs and re-lists.
        """
        kind = update_type_of(update_type)
        names = [s.strip() for s in slugs if s and s.strip()]
        if kind is not UpdateType.core and not names:
            raise InvalidInput(f"no {kind.value} slugs given for site {site_id}: the dashboard would update nothing",
                               code="client_validation")
        route = f"/updates/{segment(site_id, 'site id or domain')}/update/{_UPDATE_ROUTE[kind]}"
        form = {"slug": ",".join(names)} if names else None
        answer = await self._rest("POST", route, idempotent=False, form=form)
        return parse(answer, lambda body: SiteItemsUpdate.from_body(str(site_id), kind, body))

    # tags

    async def list_tags(self) -> list[Tag]:
        async def page(number: int, size: int) -> Page[Tag]:
            return parse(await self._rest("GET", "/tags", params={"page": number, "per_page": size}), tag_page)

        return await collect_pages(page, per_page=REST_PAGE_SIZE, what="tags")

    async def get_tag(self, tag_id: int) -> Tag:
        return parse(await self._rest("GET", f"/tags/{int(tag_id)}"), tag_of)

    async def add_tag(self, name: str, color: str | None = None) -> Tag:
        if not name or not name.strip():
            raise InvalidInput("a tag needs a name", code="client_validation")
        body = {"name": name.strip(), **({"color": color} if color else {})}
        return parse(await self._rest("POST", "/tags/add", idempotent=False, json=body), tag_of)

    async def edit_tag(self, tag_id: int, *, name: str | None = None, color: str | None = None) -> Tag:
        body = {k: v for k, v in {"name": name, "color": color}.items() if v is not None}
        answer = await self._rest("PUT", f"/tags/{int(tag_id)}/edit", idempotent=True, json=body)
        return parse(answer, tag_of)

    async def delete_tag(self, tag_id: int) -> ActionMessage:
        return parse(await self._rest("DELETE", f"/tags/{int(tag_id)}/remove", idempotent=False), action_message)

    async def tag_sites(self, tag_id: int) -> list[Site]:
        return parse(await self._rest("GET", f"/tags/{int(tag_id)}/sites"), lambda b: site_page(b).items)

    # clients

    async def list_clients(self) -> list[Client]:
        async def page(number: int, size: int) -> Page[Client]:
            return parse(await self._rest("GET", "/clients", params={"page": number, "per_page": size}), client_page)

        return await collect_pages(page, per_page=REST_PAGE_SIZE, what="clients")

    async def get_client(self, id_or_email: int | str) -> Client:
        return parse(await self._rest("GET", f"/clients/{segment(id_or_email, 'client id or e-mail')}"), client_of)

    # monitors

    async def list_monitors(self, *, status: str | None = None) -> list[Monitor]:
        async def page(number: int, size: int) -> Page[Monitor]:
            answer = await self._rest("GET", "/monitors", params={"page": number, "per_page": size, "status": status})
            return parse(answer, monitor_page)

        return await collect_pages(page, per_page=MONITOR_PAGE_SIZE, what="monitors")

    async def get_monitor(self, id_or_domain: int | str) -> Monitor:
        return parse(await self._rest("GET", f"/monitors/{segment(id_or_domain, 'monitor')}"), monitor_of)

    async def monitor_incidents(self, id_or_domain: int | str) -> list[Incident]:
        return parse(await self._rest("GET", f"/monitors/{segment(id_or_domain, 'monitor')}/incidents"), incidents)

    async def monitor_heartbeats(
        self, id_or_domain: int | str, *, period: str | None = None, status: str | None = None
    ) -> list[Heartbeat]:
        """Heartbeats of one monitor; none in the period is an empty list, not an error."""
        route = f"/monitors/{segment(id_or_domain, 'monitor')}/heartbeat"
        try:
            answer = await self._rest("GET", route, params={"period": period, "status": status})
        except ActionFailed as exc:
            if "no heartbeats" in exc.message.lower():
                return []
            raise
        return parse(answer, heartbeats)

    async def check_monitor(self, id_or_domain: int | str) -> MonitorCheck:
        route = f"/monitors/{segment(id_or_domain, 'monitor')}/check"
        return parse(await self._rest("POST", route, idempotent=True), monitor_check)

    # API keys

    async def list_api_keys(self) -> list[ApiKey]:
        async def page(number: int, size: int) -> Page[ApiKey]:
            answer = await self._rest("GET", "/rest-api/keys", params={"page": number, "per_page": size})
            return parse(answer, key_page)

        return await collect_pages(page, per_page=KEY_PAGE_SIZE, what="API keys")

    async def add_api_key(
        self, *, description: str = "", permissions: Sequence[str] = KEY_PERMISSIONS, active: bool = True
    ) -> NewApiKey:
        """Create a v2 key; its token is in the answer only (as a SecretStr). The route takes a form body."""
        wanted = [p.strip().lower() for p in permissions]
        if not wanted or any(p not in KEY_PERMISSIONS for p in wanted):
            raise InvalidInput(f"permissions must be among {KEY_PERMISSIONS}, got {list(permissions)}",
                               code="client_validation")
        form = {"description": description, "permissions": ",".join(wanted), "active": "1" if active else "0"}
        return parse(await self._rest("POST", "/rest-api/add-key", idempotent=False, form=form), new_key)

    async def edit_api_key(
        self,
        key_id: int | str,
        *,
        active: bool | None = None,
        description: str | None = None,
        permissions: Sequence[str] | None = None,
    ) -> ActionMessage:
        """Change a key (the route takes a JSON body and PUT or PATCH only)."""
        body: dict[str, Any] = {"active": active, "description": description,
                                "permissions": ",".join(permissions) if permissions is not None else None}
        body = {k: v for k, v in body.items() if v is not None}
        route = f"/rest-api/edit-key/{segment(key_id, 'API key id')}"
        return parse(await self._rest("PUT", route, idempotent=True, json=body), action_message)

    async def delete_api_key(self, key_id: int | str) -> ActionMessage:
        route = f"/rest-api/delete-key/{segment(key_id, 'API key id')}"
        return parse(await self._rest("DELETE", route, idempotent=False), action_message)

    # settings and batch

    async def get_settings(self, category: str) -> dict[str, Any]:
        return parse(await self._rest("GET", f"/settings/{_settings_category(category)}"), settings_of)

    async def connection_limits(self) -> ConnectionLimits:
        """MainWP's limits on its calls to child sites, from the advanced settings (its defaults for a key not
        set there)."""
        return ConnectionLimits.model_validate(await self.get_settings("advanced"))

    async def edit_settings(self, category: str, values: dict[str, Any]) -> dict[str, Any]:
        route = f"/settings/{_settings_category(category)}/edit"
        return parse(await self._rest("PUT", route, idempotent=True, json=values), settings_of)

    async def batch(self, operations: dict[str, Any]) -> dict[str, Any]:
        """POST `/batch` (at most 100 items by default); never retried."""
        if not isinstance(operations, dict):
            raise InvalidInput("a batch is an object keyed by family (sites, tags, ...)", code="client_validation")
        return parse(await self._rest("POST", "/batch", idempotent=False, json=operations), batch_answer)

    # legacy v1

    async def all_sites(self) -> list[Site]:
        """Legacy v1 `sites/all-sites` (consumer key and secret; only if the dashboard enables v1)."""
        return parse(await self._rest("GET", "/sites/all-sites", version="v1"), sites_keyed)


def _settings_category(category: str) -> str:
    if category not in SETTINGS_CATEGORIES:
        raise InvalidInput(f"unknown settings category {category!r}; one of {', '.join(SETTINGS_CATEGORIES)}",
                           code="client_validation")
    return category
