"""Typed records of the dashboard's data, with a compact JSON form for SQLite.

Each installed item keeps two views: what is really on the child (`version`, `offer`) and what the dashboard
stored at its last sync (`known_version`, `known_offer`), because the real dashboard lists from the stored copy
and only a sync refreshes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, ClassVar, Literal

ItemType = Literal["plugin", "theme", "translation", "wp"]
ITEM_TYPES: tuple[ItemType, ...] = ("wp", "plugin", "theme", "translation")
PLURAL = {"wp": "wp", "plugin": "plugins", "theme": "themes", "translation": "translations"}
SINGULAR = {"wp": "wp", "plugins": "plugin", "themes": "theme", "translations": "translation"}


@dataclass(slots=True)
class Item:
    """A plugin, theme or translation pack on one site (translations: `version` is the pack's version)."""

    slug: str
    name: str
    version: str
    active: bool = False
    offer: str | None = None
    known_version: str = ""
    known_offer: str | None = None

    def to_row(self) -> list[Any]:
        return [self.slug, self.name, self.version, self.active, self.offer, self.known_version, self.known_offer]

    @classmethod
    def from_row(cls, row: list[Any]) -> Item:
        return cls(*row)


@dataclass(slots=True)
class Heartbeat:
    heartbeat_id: int
    status: int  # 0 down, 1 up, 2 pending, 3 first
    msg: str
    importance: int
    time: float
    ping_ms: int
    http_code: int
    duration: int = 0
    down_count: int = 0


@dataclass(slots=True)
class Monitor:
    id: int
    type: str = "http"
    method: str = "useglobal"
    keyword: str = ""
    active: int = 1
    interval: int = 60
    maxretries: int = 1
    timeout: int = 60
    expected_status: str = ""
    last_status: str = "unknown"
    last_check_at: float | None = None
    last_status_code: int | None = None
    heartbeats: list[Heartbeat] = field(default_factory=list)


@dataclass(slots=True)
class Post:
    id: int
    post_type: str  # post | page
    title: str
    status: str
    content: str
    author: str
    date: float


@dataclass(slots=True)
class SiteUser:
    id: int
    username: str
    email: str
    role: str
    first_name: str = ""
    last_name: str = ""
    display_name: str = ""


@dataclass(slots=True)
class Site:
    id: int
    name: str
    url: str
    admin: str = "admin"
    client_id: int = 0
    tag_ids: list[int] = field(default_factory=list)
    note: str = ""
    wp_version: str = "6.8.3"
    wp_offer: str | None = None
    known_wp_version: str = ""
    known_wp_offer: str | None = None
    php_version: str = "8.2.24"
    child_version: str = "6.1"  # what the child plugin really is (the REST site record shows it, from `site_info`)
    # The dashboard's sync record of it (`wp_sync.version`), which the abilities' child-version gate reads: a sync
    # the child does not answer records "0" (`sync_information_array` starts from 0); "" takes `child_version`.
    synced_child_version: str = ""
    mysql_version: str = "10.11.6-MariaDB"
    memory_limit: str = "256M"
    database_size: int = 0
    plugins: dict[str, Item] = field(default_factory=dict)
    themes: dict[str, Item] = field(default_factory=dict)
    translations: dict[str, Item] = field(default_factory=dict)
    ignored_plugins: dict[str, list[str]] = field(default_factory=dict)
    ignored_themes: dict[str, list[str]] = field(default_factory=dict)
    ignored_core: list[str] = field(default_factory=list)
    ignore_core_updates: bool = False
    ignore_plugin_updates: bool = False
    ignore_theme_updates: bool = False
    sync_errors: str = ""
    suspended: bool = False
    reachable: bool = True
    child_connected: bool = True
    http_code: int = 200
    response_ms: int = 120
    offline_check_result: int = 1
    last_sync: float = 0.0
    last_check: float = 0.0
    health_score: int = 100
    added: float = 0.0
    fail_items: dict[str, str] = field(default_factory=dict)
    broken_by: str = ""  # "type:slug" of the update that broke the front end ("ground-truth" when set directly)
    fatal_by: str = ""  # "type:slug" of the update that fatals while WordPress loads: pages AND the child die
    visual_faults: dict[str, list[str]] = field(default_factory=dict)  # "type:slug" -> [mode, bad version]
    guard: dict[str, Any] = field(default_factory=dict)  # Fleet Guard on the site (emulator.guard); empty: none
    # the dashboard's `rollback_updates_data`: "plugin"|"theme" -> slug -> version WordPress rolled back -> record
    rollbacks: dict[str, dict[str, dict[str, dict[str, Any]]]] = field(default_factory=dict)
    monitor: Monitor | None = None
    posts: list[Post] = field(default_factory=list)
    users: list[SiteUser] = field(default_factory=list)

    ITEM_MAPS: ClassVar[tuple[str, ...]] = ("plugins", "themes", "translations")

    def __post_init__(self) -> None:
        """A site enters the dashboard through a sync of its child, which records its version; so does a site read
        from a database written before the record was kept."""
        if not self.synced_child_version:
            self.synced_child_version = self.child_version

    @property
    def domain(self) -> str:
        return self.url.split("://", 1)[-1].rstrip("/")

    def items(self, item_type: ItemType) -> dict[str, Item]:
        return {"plugin": self.plugins, "theme": self.themes, "translation": self.translations}[item_type]

    def live(self, culprit: str) -> bool:
        """A culprit runs only while its code loads: not an inactive plugin's, nor a theme's but the active
        one's (core, and a break set directly, always)."""
        if not culprit:
            return False
        kind, _, slug = culprit.partition(":")
        if kind == "plugin" and slug in self.guard_paused:
            return False  # its guard leaves it out of every request
        items = {"plugin": self.plugins, "theme": self.themes}.get(kind, {})
        return slug not in items or items[slug].active

    @property
    def guard_paused(self) -> list[str]:
        """The plugins the site's guard pauses: only an installed guard whose must-use loader runs first can."""
        guard = self.guard
        if not guard.get("armed") or guard.get("removed") or guard.get("mode") != "must-use":
            return []
        return list(guard.get("paused", []))

    @property
    def front_end_broken(self) -> bool:
        """Every page is WordPress's critical-error page (a fatal in a template, or at load)."""
        return self.live(self.broken_by) or self.dead_at_load

    @property
    def dead_at_load(self) -> bool:
        """A fatal while WordPress loads: before the MainWP Child can answer, so the dashboard reaches nothing."""
        return self.live(self.fatal_by)

    def core_item(self) -> Item:
        """WordPress core seen as an item, so update code treats it as a plugin; `set_core_item` writes it back."""
        return Item("wordpress", "WordPress", self.wp_version, True, self.wp_offer, self.known_wp_version,
                    self.known_wp_offer)

    def set_core_item(self, item: Item) -> None:
        self.wp_version, self.wp_offer = item.version, item.offer
        self.known_wp_version, self.known_wp_offer = item.known_version, item.known_offer

    def to_row(self) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for name in _field_names(Site):
            value = getattr(self, name)
            if name in self.ITEM_MAPS:
                value = [item.to_row() for item in value.values()]
            elif name == "monitor":
                value = None if value is None else _monitor_row(value)
            elif name == "posts":
                value = [[p.id, p.post_type, p.title, p.status, p.content, p.author, p.date] for p in value]
            elif name == "users":
                value = [[u.id, u.username, u.email, u.role, u.first_name, u.last_name, u.display_name] for u in value]
            row[name] = value
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Site:
        data = dict(row)
        for name in cls.ITEM_MAPS:
            data[name] = {r[0]: Item.from_row(r) for r in data.get(name, [])}
        monitor = data.get("monitor")
        if monitor is not None:
            heartbeats = [Heartbeat(*h) for h in monitor.pop("heartbeats", [])]
            data["monitor"] = Monitor(**monitor, heartbeats=heartbeats)
        data["posts"] = [Post(*p) for p in data.get("posts", [])]
        data["users"] = [SiteUser(*u) for u in data.get("users", [])]
        return cls(**data)


def _monitor_row(monitor: Monitor) -> dict[str, Any]:
    row = {name: getattr(monitor, name) for name in _field_names(Monitor) if name != "heartbeats"}
    beat_fields = _field_names(Heartbeat)
    row["heartbeats"] = [[getattr(h, name) for name in beat_fields] for h in monitor.heartbeats]
    return row


@dataclass(slots=True)
class Tag:
    id: int
    name: str
    color: str = ""


@dataclass(slots=True)
class Client:
    id: int
    name: str
    client_email: str = ""
    client_phone: str = ""
    address_1: str = ""
    address_2: str = ""
    city: str = ""
    zip: str = ""
    state: str = ""
    country: str = ""
    note: str = ""
    client_facebook: str = ""
    client_twitter: str = ""
    client_instagram: str = ""
    client_linkedin: str = ""
    created: float = 0.0
    suspended: int = 0  # 0 active, 1 suspended, 2 lead, 3 lost
    custom_fields: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ClientField:
    field_id: int
    name: str
    description: str = ""


@dataclass(slots=True)
class Cost:
    id: int
    name: str
    url: str = ""
    type: str = "subscription"
    product_type: str = "plugin"
    slug: str = ""
    license_type: str = "single_site"
    cost_status: str = "active"
    payment_method: str = "paypal"
    price: float = 0.0
    renewal_type: str = "yearly"
    last_renewal: float = 0.0
    next_renewal: float = 0.0
    note: str = ""
    sites: list[int] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    clients: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ApiKey:
    """A REST API key: the consumer key is kept as an HMAC, the secret as a salted hash."""

    key_id: int
    description: str
    permissions: str  # read | write | read_write | delete
    ck_hash: str
    cs_hash: str
    cs_salt: str
    truncated_key: str
    enabled: bool = True
    user_id: int = 1
    last_access: float | None = None


@dataclass(slots=True)
class V1Key:
    """A legacy v1 key. The real dashboard lists it with its plaintext consumer key as id; the emulator keeps no
    key in clear, so it is known by the keyed hash of that key (`ck_hash`) and lists that."""

    ck_hash: str
    truncated_key: str
    description: str
    perms: str  # letters r,w,d
    cs_hash: str
    cs_salt: str
    enabled: bool = True


def record_to_row(record: Any) -> dict[str, Any]:
    """Flat dataclass -> dict (records other than Site have no nested records)."""
    return {name: getattr(record, name) for name in _field_names(type(record))}


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))
