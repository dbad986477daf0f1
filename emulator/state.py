"""The one model of the fleet: typed records in memory for speed, written through to SQLite.

REST v2, legacy v1, the abilities and the background jobs all read and change the dashboard through this
class (data) and `emulator.operations` (work on sites), so every interface sees the same dashboard.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from emulator.auth import bearer_token, bootstrap_credentials, hash_consumer_key, restore_bootstrap_credentials
from emulator.config import EmulatorConfig
from emulator.fleet import connected_child, generate_fleet
from emulator.records import (
    ApiKey,
    Client,
    ClientField,
    Cost,
    Item,
    ItemType,
    Site,
    Tag,
    V1Key,
    record_to_row,
)
from emulator.store import RecordStore

T = TypeVar("T")
SITE_STATUSES = ("any", "connected", "disconnected", "suspended", "available_update")


@dataclass(slots=True, frozen=True)
class PendingUpdate:
    """One update the dashboard lists (from its stored copy of the site)."""

    site_id: int
    site_url: str
    site_name: str
    type: ItemType
    slug: str
    name: str
    current_version: str
    new_version: str


@dataclass(slots=True, frozen=True)
class IgnoredEntry:
    site_id: int | None  # None: the global list
    type: ItemType
    slug: str
    name: str
    ignored_versions: tuple[str, ...]


def normalise_domain(value: str) -> str:
    value = value.strip().lower()
    if "://" in value:
        value = value.split("://", 1)[1]
    return value.rstrip("/")


def by_id_lists(records: list[Any], include: list[int] | None, exclude: list[int] | None) -> list[Any]:
    """The records whose `id` is in `include` (when given) and not in `exclude`, in their order."""
    if include:
        wanted = set(include)
        records = [r for r in records if r.id in wanted]
    if exclude:
        unwanted = set(exclude)
        records = [r for r in records if r.id not in unwanted]
    return records


def default_settings(namespace: str) -> dict[str, dict[str, Any]]:
    text = resources.files("emulator").joinpath("data/settings.json").read_text(encoding="utf-8")
    return json.loads(text.replace("NS_", f"{namespace}_"))


class FleetState:
    """All of the dashboard's data. Mutations go through methods here (or save_*), which write through."""

    def __init__(self, config: EmulatorConfig, store: RecordStore) -> None:
        self.config = config
        self.store = store
        self.sites: dict[int, Site] = {}
        self._domains: dict[str, int] = {}
        self.tags: dict[int, Tag] = {}
        self.clients: dict[int, Client] = {}
        self.client_fields: dict[int, ClientField] = {}
        self.costs: dict[int, Cost] = {}
        self.api_keys: dict[int, ApiKey] = {}
        self.keys_by_hash: dict[str, int] = {}
        self.v1_keys: dict[str, V1Key] = {}
        self.settings: dict[str, dict[str, Any]] = {}
        self.options: dict[str, Any] = {}
        self.global_ignores: dict[str, Any] = {"plugins": {}, "themes": {}, "core": []}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.tool_jobs: dict[str, dict[str, Any]] = {}
        self._records: dict[str, dict[str, Any]] = {}
        self.view_cache: dict[int, dict[str, Any]] = {}  # encoded REST views, dropped whenever a site is saved
        # pending lists per site, and fleet-wide listings derived from them: dropped by `_changed`
        self._pending: dict[int, dict[tuple[Any, ...], list[PendingUpdate]]] = {}
        self._listings: dict[Hashable, Any] = {}
        self.meta: dict[str, Any] = {}
        self.request_counts: Counter[str] = Counter()
        self.now: Callable[[], float] = time.time  # the dashboard's clock; `build_emulator` sets `Clock.now`

    # ---- opening -------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, config: EmulatorConfig, now: float | None = None) -> FleetState:
        """Load the dashboard from `config.db`, or generate a fresh one there (in memory when db is None)."""
        store = RecordStore(config.db)
        state = cls(config, store)
        if store.is_empty():
            state._generate(state.now() if now is None else now)
        else:
            state._load()
        return state

    def _generate(self, now: float) -> None:
        fleet = generate_fleet(self.config.sites, self.config.seed, now)
        self.meta = {"namespace": self.config.namespace, "created": now, "next_ids": {}}
        for site in fleet.sites:
            self._index_site(site)
        self.tags = {t.id: t for t in fleet.tags}
        self.clients = {c.id: c for c in fleet.clients}
        self.costs = {c.id: c for c in fleet.costs}
        self.global_ignores = fleet.global_ignores
        self.settings = default_settings(self.config.namespace)
        self.options = {
            self.config.name("rest_batch_items_limit"): 100,
            self.config.name("abilities_batch_threshold"): 200,
            self.config.name("abilities_cron_chunk_size"): 20,
            self.config.name("enable_legacy_rest_api"): 1,
            "last_time_start_batch_updates": "",
        }
        self.store.put_many("site", ((s.id, s.to_row()) for s in fleet.sites))
        self.store.put_many("tag", ((t.id, record_to_row(t)) for t in fleet.tags))
        self.store.put_many("client", ((c.id, record_to_row(c)) for c in fleet.clients))
        self.store.put_many("cost", ((c.id, record_to_row(c)) for c in fleet.costs))
        self.store.put_many("settings", self.settings.items())
        self.store.put_many("option", self.options.items())
        self.store.put("ignore", "global", self.global_ignores)
        bootstrap_credentials(self)
        self.save_meta()

    def _load(self) -> None:
        self.meta = self.store.load("meta").get("meta", {})
        if self.meta.get("namespace") != self.config.namespace:
            raise ValueError(
                f"the database {self.config.db} holds a '{self.meta.get('namespace')}' dashboard, "
                f"not '{self.config.namespace}'"
            )
        for row in self.store.load("site").values():
            self._index_site(Site.from_row(row))
        self.sites = dict(sorted(self.sites.items()))
        self.tags = {int(k): Tag(**v) for k, v in self.store.load("tag").items()}
        self.clients = {int(k): Client(**v) for k, v in self.store.load("client").items()}
        self.client_fields = {int(k): ClientField(**v) for k, v in self.store.load("client_field").items()}
        self.costs = {int(k): Cost(**v) for k, v in self.store.load("cost").items()}
        for row in self.store.load("api_key").values():
            self._index_key(ApiKey(**row))
        for stored, row in self.store.load("v1_key").items():
            if "consumer_key" in row:  # a database from before keys were kept only as hashes
                plain = row.pop("consumer_key")
                row |= {"ck_hash": hash_consumer_key(self, plain), "truncated_key": plain[-7:]}
                self.store.delete("v1_key", stored)
                self.save_v1_key(V1Key(**row))
            else:
                self.v1_keys[stored] = V1Key(**row)
        legacy = self.meta.pop("bootstrap", None)  # older databases kept the plaintext here
        previous = self.config.previous_credentials()
        if previous is None and legacy is not None:
            previous = {"api_keys": {r: bearer_token(k["consumer_key"], k["consumer_secret"])
                                     for r, k in legacy["api_keys"].items()},
                        "application_password": legacy["application_password"]}
        restore_bootstrap_credentials(self, previous)
        self.save_meta()
        self.settings = self.store.load("settings")
        self.options = self.store.load("option")
        self.global_ignores = self.store.load("ignore").get("global", self.global_ignores)
        self.jobs = self.store.load("job")
        self.tool_jobs = self.store.load("tool_job")

    def close(self) -> None:
        self.store.close()

    # ---- ids and write-through -----------------------------------------------------------------------------

    def next_id(self, kind: str, existing: dict[int, Any]) -> int:
        """Ids are never reused, as with MySQL auto-increment."""
        next_ids = self.meta.setdefault("next_ids", {})
        value = max(next_ids.get(kind, 0), max(existing, default=0)) + 1
        next_ids[kind] = value
        self.save_meta()
        return value

    def save_meta(self) -> None:
        """The meta record, without the bootstrap plaintext (only the credentials file holds it)."""
        self.store.put("meta", "meta", {k: v for k, v in self.meta.items() if k != "bootstrap"})

    def save_site(self, site: Site) -> None:
        """Persist a changed site. Every change to a site must end here (its REST views, pending list and the
        fleet-wide listings are cached until then)."""
        self._changed(site.id)
        self.store.put("site", site.id, site.to_row())

    def save_sites(self, sites: list[Site]) -> None:
        for site in sites:
            self._changed(site.id)
        self.store.put_many("site", ((s.id, s.to_row()) for s in sites))

    def _changed(self, site_id: int | None) -> None:
        """Drop what was derived from one site (None: from the ignore lists every site shares)."""
        if site_id is None:
            self._pending.clear()
        else:
            self.view_cache.pop(site_id, None)
            self._pending.pop(site_id, None)
        self._listings.clear()

    def listing(self, key: Hashable, build: Callable[[], T]) -> T:
        """A fleet-wide derived value (e.g. a listing's encoded rows), built once and kept until any site or
        ignore list changes. Callers must not mutate what they get back."""
        if key not in self._listings:
            self._listings[key] = build()
        return self._listings[key]

    def save_tag(self, tag: Tag) -> None:
        self.store.put("tag", tag.id, record_to_row(tag))

    def save_client(self, client: Client) -> None:
        self.store.put("client", client.id, record_to_row(client))

    def save_client_field(self, client_field: ClientField) -> None:
        self.client_fields[client_field.field_id] = client_field
        self.store.put("client_field", client_field.field_id, record_to_row(client_field))

    def delete_client_field(self, client_field: ClientField) -> None:
        self.client_fields.pop(client_field.field_id, None)
        self.store.delete("client_field", client_field.field_id)

    def save_cost(self, cost: Cost) -> None:
        self.store.put("cost", cost.id, record_to_row(cost))

    def save_api_key(self, key: ApiKey) -> None:
        self._index_key(key)
        self.store.put("api_key", key.key_id, record_to_row(key))

    def delete_api_key(self, key: ApiKey) -> None:
        self.api_keys.pop(key.key_id, None)
        self.keys_by_hash.pop(key.ck_hash, None)
        self.store.delete("api_key", key.key_id)

    def save_v1_key(self, key: V1Key) -> None:
        self.v1_keys[key.ck_hash] = key
        self.store.put("v1_key", key.ck_hash, record_to_row(key))

    def delete_v1_key(self, ck_hash: str) -> None:
        self.v1_keys.pop(ck_hash, None)
        self.store.delete("v1_key", ck_hash)

    def save_settings(self, category: str) -> None:
        self.store.put("settings", category, self.settings[category])

    def set_option(self, name: str, value: Any) -> None:
        self.options[name] = value
        self.store.put("option", name, value)

    def option(self, suffix: str) -> Any:
        """A namespaced option: `option("rest_batch_items_limit")` reads `svc_rest_batch_items_limit`."""
        return self.options.get(self.config.name(suffix))

    def save_global_ignores(self) -> None:
        self._changed(None)
        self.store.put("ignore", "global", self.global_ignores)

    def save_job(self, job_id: str, data: dict[str, Any]) -> None:
        """Persist a background job (any JSON-able dict); `state.jobs[job_id]` holds the latest copy."""
        self.jobs[job_id] = data
        self.store.put("job", job_id, data)

    def delete_job(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)
        self.store.delete("job", job_id)

    def save_tool_job(self, job_id: str, data: dict[str, Any]) -> None:
        self.tool_jobs[job_id] = data
        self.store.put("tool_job", job_id, data)

    def records(self, kind: str) -> dict[str, Any]:
        """Any other persisted collection (e.g. time-tracker tasks), loaded on first use; change it through
        `save_record`."""
        if kind not in self._records:
            self._records[kind] = self.store.load(f"x:{kind}")
        return self._records[kind]

    def save_record(self, kind: str, key: str, data: Any) -> None:
        self.records(kind)[key] = data
        self.store.put(f"x:{kind}", key, data)

    def _index_site(self, site: Site) -> None:
        self._changed(site.id)
        self.sites[site.id] = site
        self._domains[normalise_domain(site.url)] = site.id

    def _index_key(self, key: ApiKey) -> None:
        self.api_keys[key.key_id] = key
        self.keys_by_hash[key.ck_hash] = key.key_id

    # ---- sites ---------------------------------------------------------------------------------------------

    def find_site(self, id_or_domain: str | int) -> Site | None:
        """A site by numeric id, domain or URL (`example.com`, `https://example.com/`, `127.0.0.1:8082`)."""
        text = str(id_or_domain).strip()
        if text.isdigit():
            return self.sites.get(int(text))
        domain = normalise_domain(text)
        toggled = domain.removeprefix("www.") if domain.startswith("www.") else "www." + domain
        site_id = self._domains.get(domain, self._domains.get(toggled))  # `www.` either way, as the dashboard
        return None if site_id is None else self.sites.get(site_id)

    @staticmethod
    def site_status(site: Site) -> str:
        if site.suspended:
            return "suspended"
        return "disconnected" if site.sync_errors else "connected"

    def has_pending_update(self, site: Site) -> bool:
        return bool(self.pending_updates(site, respect_ignores=False))

    def list_sites(
        self,
        *,
        status: str | None = None,
        search: str | None = None,
        include: list[int] | None = None,
        exclude: list[int] | None = None,
        tag_id: int | None = None,
        client_id: int | None = None,
    ) -> list[Site]:
        """Filter the fleet the way the dashboard's lists do; `status` must be one of SITE_STATUSES."""
        if status is not None and status not in SITE_STATUSES:
            raise ValueError(f"status must be one of {', '.join(SITE_STATUSES)}")
        sites: list[Site] = (
            [self.sites[i] for i in include if i in self.sites] if include else list(self.sites.values())
        )
        if exclude:
            excluded = set(exclude)
            sites = [s for s in sites if s.id not in excluded]
        if status and status != "any":
            if status == "available_update":
                sites = [s for s in sites if self.has_pending_update(s)]
            else:
                sites = [s for s in sites if self.site_status(s) == status]
        if search:
            needle = search.lower()
            sites = [s for s in sites if needle in s.name.lower() or needle in s.url.lower()]
        if tag_id is not None:
            sites = [s for s in sites if tag_id in s.tag_ids]
        if client_id is not None:
            sites = [s for s in sites if s.client_id == client_id]
        return sites

    def add_site(
        self,
        url: str,
        name: str,
        admin: str = "admin",
        client_id: int = 0,
        tag_ids: list[int] | None = None,
        now: float | None = None,
    ) -> Site:
        """Add a freshly connected child site: no plugins beyond the child, synced now."""
        when = self.now() if now is None else now
        site = Site(
            id=self.next_id("site", self.sites),
            name=name,
            url=url,
            admin=admin,
            client_id=client_id,
            tag_ids=sorted(tag_ids or []),
            added=when,
            last_sync=when,
        )
        site.plugins["mainwp-child/mainwp-child.php"] = Item(
            "mainwp-child/mainwp-child.php", "MainWP Child", "6.1", active=True, known_version="6.1"
        )
        site.themes["twentytwentyfive"] = Item(
            "twentytwentyfive", "Twenty Twenty-Five", "1.3", active=True, known_version="1.3"
        )
        site.known_wp_version = site.wp_version
        self._index_site(site)
        self.save_site(site)
        return site

    def connect_child(self, url: str, name: str, admin: str = "admin", client_id: int = 0,
                      tag_ids: list[int] | None = None) -> Site:
        """Connect a WordPress site that already runs, with plugins, themes and pending releases of its own
        (`emulator.fleet.connected_child`): the dashboard lists its updates only after it syncs it."""
        site = connected_child(self.next_id("site", self.sites), url, name, admin, self.config.seed, self.now())
        site.client_id, site.tag_ids = client_id, sorted(tag_ids or [])
        self._index_site(site)
        self.save_site(site)
        return site

    def change_site_url(self, site: Site, url: str) -> None:
        """Move a site to a new URL, keeping the domain index right."""
        self._domains.pop(normalise_domain(site.url), None)
        site.url = url
        self._index_site(site)
        self.save_site(site)

    def remove_site(self, site: Site) -> None:
        self.sites.pop(site.id, None)
        self._changed(site.id)
        self._domains.pop(normalise_domain(site.url), None)
        self.store.delete("site", site.id)

    # ---- updates and ignore lists --------------------------------------------------------------------------

    def is_ignored(self, site: Site, item_type: ItemType, slug: str, new_version: str | None) -> bool:
        """Hidden by a per-site flag, a per-site entry or a global entry (all versions or this version)."""
        if item_type == "translation":
            return False
        if item_type == "wp":
            versions = list(site.ignored_core) + list(self.global_ignores.get("core", []))
            return site.ignore_core_updates or "all_versions" in versions or (new_version in versions)
        if (item_type == "plugin" and site.ignore_plugin_updates) or (
            item_type == "theme" and site.ignore_theme_updates
        ):
            return True
        site_list = site.ignored_plugins if item_type == "plugin" else site.ignored_themes
        global_list = self.global_ignores.get("plugins" if item_type == "plugin" else "themes", {})
        for entries in (site_list, global_list):
            versions = entries.get(slug)
            if versions is not None and ("all_versions" in versions or new_version in versions):
                return True
        return False

    def pending_updates(
        self, site: Site, types: tuple[ItemType, ...] | None = None, *, respect_ignores: bool = True
    ) -> list[PendingUpdate]:
        """What the dashboard lists for a site: its stored copy from the last sync, ignored items left out.
        Cached per site until the site or the global ignore list is saved."""
        cached = self._pending.setdefault(site.id, {})
        key = (types, respect_ignores)
        if key not in cached:
            cached[key] = self._build_pending_updates(site, types, respect_ignores)
        return list(cached[key])

    def _build_pending_updates(
        self, site: Site, types: tuple[ItemType, ...] | None, respect_ignores: bool
    ) -> list[PendingUpdate]:
        wanted = types or ("wp", "plugin", "theme", "translation")
        result: list[PendingUpdate] = []
        if (
            "wp" in wanted
            and site.known_wp_offer
            and not (respect_ignores and self.is_ignored(site, "wp", "wordpress", site.known_wp_offer))
        ):
            result.append(
                PendingUpdate(
                    site.id,
                    site.url,
                    site.name,
                    "wp",
                    "wordpress",
                    "WordPress",
                    site.known_wp_version,
                    site.known_wp_offer,
                )
            )
        for item_type in ("plugin", "theme", "translation"):
            if item_type not in wanted:
                continue
            for item in site.items(item_type).values():  # type: ignore[arg-type]
                if item.known_offer is None:
                    continue
                if respect_ignores and self.is_ignored(site, item_type, item.slug, item.known_offer):  # type: ignore[arg-type]
                    continue
                new_version = "" if item_type == "translation" else item.known_offer
                result.append(
                    PendingUpdate(
                        site.id,
                        site.url,
                        site.name,
                        item_type,
                        item.slug,
                        item.name,  # type: ignore[arg-type]
                        item.known_version,
                        new_version,
                    )
                )
        return result

    def all_pending_updates(
        self,
        types: tuple[ItemType, ...] | None = None,
        *,
        site_ids: list[int] | None = None,
        search: str | None = None,
        respect_ignores: bool = True,
    ) -> list[PendingUpdate]:
        """Every listed update across the fleet, in one linear pass (cached as a `listing`)."""

        def build() -> list[PendingUpdate]:
            sites = [self.sites[i] for i in site_ids if i in self.sites] if site_ids else self.sites.values()
            needle = search.lower() if search else None
            result: list[PendingUpdate] = []
            for site in sites:
                for update in self.pending_updates(site, types, respect_ignores=respect_ignores):
                    if needle and needle not in update.slug.lower() and needle not in update.name.lower():
                        continue
                    result.append(update)
            return result

        key = ("all_pending_updates", types, tuple(site_ids or ()), search, respect_ignores)
        return list(self.listing(key, build))

    def ignored_entries(self, site: Site | None = None) -> list[IgnoredEntry]:
        """Global entries, then (with a site) that site's entries and its ignore-everything flags."""
        entries: list[IgnoredEntry] = []
        for item_type, key in (("plugin", "plugins"), ("theme", "themes")):
            for slug, versions in self.global_ignores.get(key, {}).items():
                entries.append(
                    IgnoredEntry(
                        None,
                        item_type,
                        slug,
                        self._item_name(site, item_type, slug),  # type: ignore[arg-type]
                        tuple(versions),
                    )
                )
        if self.global_ignores.get("core"):
            entries.append(IgnoredEntry(None, "wp", "wordpress", "WordPress", tuple(self.global_ignores["core"])))
        if site is None:
            return entries
        for item_type, mapping in (("plugin", site.ignored_plugins), ("theme", site.ignored_themes)):
            for slug, versions in mapping.items():
                entries.append(
                    IgnoredEntry(
                        site.id,
                        item_type,
                        slug,
                        self._item_name(site, item_type, slug),  # type: ignore[arg-type]
                        tuple(versions),
                    )
                )
        if site.ignore_core_updates or site.ignored_core:
            entries.append(
                IgnoredEntry(site.id, "wp", "wordpress", "WordPress", tuple(site.ignored_core) or ("all_versions",))
            )
        return entries

    @staticmethod
    def _item_name(site: Site | None, item_type: ItemType, slug: str) -> str:
        if site is None or item_type not in ("plugin", "theme"):
            return slug
        item = site.items(item_type).get(slug)
        return item.name if item else slug

    def ignore_items(
        self, site: Site | None, item_type: ItemType, slugs: list[str], versions: list[str] | None = None
    ) -> None:
        """Add slugs to a site's ignore list (or the global one when site is None); core uses slug 'wordpress'."""
        versions = versions or ["all_versions"]
        if item_type == "wp":
            if site is None:
                self.global_ignores["core"] = sorted(set(self.global_ignores.get("core", [])) | set(versions))
            else:
                site.ignored_core = sorted(set(site.ignored_core) | set(versions))
        else:
            target = self._ignore_map(site, item_type)
            for slug in slugs:
                target[slug] = sorted(set(target.get(slug, [])) | set(versions))
        self._save_ignores(site)

    def unignore_items(self, site: Site | None, item_type: ItemType, slugs: list[str]) -> None:
        if item_type == "wp":
            if site is None:
                self.global_ignores["core"] = []
            else:
                site.ignored_core = []
                site.ignore_core_updates = False
        else:
            target = self._ignore_map(site, item_type)
            for slug in slugs:
                target.pop(slug, None)
        self._save_ignores(site)

    def _ignore_map(self, site: Site | None, item_type: ItemType) -> dict[str, list[str]]:
        if item_type not in ("plugin", "theme"):
            raise ValueError("translations cannot be ignored")
        if site is None:
            return self.global_ignores.setdefault("plugins" if item_type == "plugin" else "themes", {})
        return site.ignored_plugins if item_type == "plugin" else site.ignored_themes

    def _save_ignores(self, site: Site | None) -> None:
        if site is None:
            self.save_global_ignores()
        else:
            self.save_site(site)

    # ---- tags ----------------------------------------------------------------------------------------------

    def list_tags(
        self, search: str | None = None, include: list[int] | None = None, exclude: list[int] | None = None
    ) -> list[Tag]:
        tags = by_id_lists(sorted(self.tags.values(), key=lambda t: t.name.lower()), include, exclude)
        if search:
            needle = search.lower()
            tags = [t for t in tags if needle in t.name.lower() or needle == str(t.id)]
        return tags

    def tag_site_ids(self, tag_id: int) -> list[int]:
        return [s.id for s in self.sites.values() if tag_id in s.tag_ids]

    def add_tag(self, name: str, color: str = "") -> Tag:
        """A duplicate name becomes 'Name (1)', as the dashboard does."""
        names = {t.name for t in self.tags.values()}
        unique, n = name, 1
        while unique in names:
            unique, n = f"{name} ({n})", n + 1
        tag = Tag(id=self.next_id("tag", self.tags), name=unique, color=color)
        self.tags[tag.id] = tag
        self.save_tag(tag)
        return tag

    def edit_tag(self, tag: Tag, name: str | None = None, color: str | None = None) -> Tag:
        if name:
            tag.name = name
        if color is not None:
            tag.color = color
        self.save_tag(tag)
        return tag

    def delete_tag(self, tag: Tag) -> None:
        changed = [s for s in self.sites.values() if tag.id in s.tag_ids]
        for site in changed:
            site.tag_ids.remove(tag.id)
        self.save_sites(changed)
        self.tags.pop(tag.id, None)
        self.store.delete("tag", tag.id)

    def set_site_tags(self, site: Site, tag_ids: list[int]) -> None:
        site.tag_ids = sorted({t for t in tag_ids if t in self.tags})
        self.save_site(site)

    def tag_first_sites(self, name: str, count: int) -> list[int]:
        """Tag the first `count` sites that answer with `name` (the tag made if missing), as a person tags canaries
        in MainWP; returns their ids."""
        tag = next((tag for tag in self.tags.values() if tag.name == name), None) or self.add_tag(name)
        chosen = [site for site in sorted(self.sites.values(), key=lambda site: site.id) if site.reachable][:count]
        for site in chosen:
            self.set_site_tags(site, [*site.tag_ids, tag.id])
        return [site.id for site in chosen]

    # ---- clients -------------------------------------------------------------------------------------------

    def find_client(self, id_or_email: str | int) -> Client | None:
        text = str(id_or_email).strip()
        if text.isdigit():
            return self.clients.get(int(text))
        return next((c for c in self.clients.values() if c.client_email.lower() == text.lower()), None)

    def list_clients(
        self,
        search: str | None = None,
        include: list[int] | None = None,
        exclude: list[int] | None = None,
        statuses: list[int] | None = None,
    ) -> list[Client]:
        clients = by_id_lists(sorted(self.clients.values(), key=lambda c: c.name.lower()), include, exclude)
        if statuses is not None:
            clients = [c for c in clients if c.suspended in statuses]
        if search:
            needle = search.lower()
            clients = [
                c
                for c in clients
                if needle in c.name.lower() or needle in c.client_email.lower() or needle == str(c.id)
            ]
        return clients

    def add_client(self, name: str, **fields: Any) -> Client:
        client = Client(id=self.next_id("client", self.clients), name=name, created=self.now(), **fields)
        self.clients[client.id] = client
        self.save_client(client)
        return client

    def edit_client(self, client: Client, **fields: Any) -> Client:
        for key, value in fields.items():
            setattr(client, key, value)
        self.save_client(client)
        return client

    def delete_client(self, client: Client) -> None:
        changed = [s for s in self.sites.values() if s.client_id == client.id]
        for site in changed:
            site.client_id = 0
        self.save_sites(changed)
        self.clients.pop(client.id, None)
        self.store.delete("client", client.id)

    def assign_sites_to_client(self, client: Client, site_ids: list[int]) -> None:
        changed = [self.sites[i] for i in site_ids if i in self.sites]
        for site in changed:
            site.client_id = client.id
        self.save_sites(changed)

    def client_sites(self, client: Client) -> list[Site]:
        return [s for s in self.sites.values() if s.client_id == client.id]

    # ---- costs ---------------------------------------------------------------------------------------------

    def add_cost(self, name: str, **fields: Any) -> Cost:
        cost = Cost(id=self.next_id("cost", self.costs), name=name, **fields)
        self.costs[cost.id] = cost
        self.save_cost(cost)
        return cost

    def edit_cost(self, cost: Cost, **fields: Any) -> Cost:
        for key, value in fields.items():
            setattr(cost, key, value)
        self.save_cost(cost)
        return cost

    def delete_cost(self, cost: Cost) -> None:
        self.costs.pop(cost.id, None)
        self.store.delete("cost", cost.id)

    def site_costs(self, site: Site) -> list[Cost]:
        return [
            c
            for c in self.costs.values()
            if site.id in c.sites or site.client_id in c.clients or set(site.tag_ids) & set(c.groups)
        ]

    def client_costs(self, client: Client) -> list[Cost]:
        site_ids = {s.id for s in self.client_sites(client)}
        return [c for c in self.costs.values() if client.id in c.clients or site_ids & set(c.sites)]
