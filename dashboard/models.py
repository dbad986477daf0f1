"""Pydantic models of what the dashboard returns, tolerant of its real types.

The real dashboard sends ids and numbers as strings in REST v2 and as ints in the abilities, JSON-encoded
strings where lists are meant, `[]` or `""` where an object is meant, tags keyed by id, singular or plural
type names, and dates with or without a zone. The validators below absorb all of that once, so the rest of
the project sees one shape. Unknown fields are ignored.
"""

from __future__ import annotations

import html
import json
import logging
from datetime import UTC, datetime
from enum import StrEnum
from functools import cache, cached_property
from typing import Annotated, Any, Generic, TypeVar
from urllib.parse import unquote

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    SecretStr,
    TypeAdapter,
    ValidationError,
    computed_field,
    field_validator,
)
from pydantic_core import CoreSchema, core_schema

from dashboard.errors import InvalidInput

log = logging.getLogger("dashboard")


class UpdateType(StrEnum):
    """The four kinds of update, in the order they are applied: the one update-type enum of the project."""

    translation = "translation"
    plugin = "plugin"
    theme = "theme"
    core = "core"


def _blank_to_none(value: Any) -> Any:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return value


def _to_int(value: Any) -> Any:
    value = _blank_to_none(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _to_bool(value: Any) -> Any:
    value = _blank_to_none(value)
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _decode_json(value: Any) -> Any:
    """Fields such as `plugins` or `plugin_upgrades` arrive as JSON text; `""` means nothing."""
    value = _blank_to_none(value)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _to_time(value: Any) -> Any:
    """ISO dates with or without a zone (no zone means UTC), `Y-m-d H:i:s`, unix seconds, `""`/0 -> None."""
    value = _blank_to_none(value)
    if value is None or value == 0 or value == "0":
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, tz=UTC)
    if isinstance(value, str):
        text = value.strip().replace("Z", "+00:00")
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return value


def _to_update_type(value: Any) -> Any:
    if isinstance(value, str):
        key = value.strip().lower()
        return _TYPE_ALIASES.get(key, key)
    return value


def update_type_of(value: UpdateType | str) -> UpdateType:
    """`plugin`/`plugins`, `wp`/`core`, ... -> the one `UpdateType`; a clear error for anything else."""
    normal = _to_update_type(value.value if isinstance(value, UpdateType) else value)
    try:
        return UpdateType(normal)
    except ValueError:
        choices = ", ".join(t.value for t in UpdateType)
        raise InvalidInput(f"unknown update type {value!r}; one of {choices}", code="client_validation") from None


_TYPE_ALIASES = {
    "plugins": "plugin",
    "themes": "theme",
    "translations": "translation",
    "wp": "core",
    "wordpress": "core",
}

Int = Annotated[int, BeforeValidator(_to_int)]
OptInt = Annotated[int | None, BeforeValidator(_to_int)]
OptFloat = Annotated[float | None, BeforeValidator(_blank_to_none)]
Bool = Annotated[bool, BeforeValidator(_to_bool)]


class _Text:
    """Text that may arrive as a number or null: a string (nearly every value) is taken as is inside
    pydantic-core, anything else goes through `str()` in Python (`None` -> `none`)."""

    def __init__(self, none: str | None) -> None:
        self.none = none

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        none = self.none
        to_text = core_schema.no_info_before_validator_function(lambda v: none if v is None else str(v),
                                                                core_schema.str_schema())
        text = core_schema.union_schema([core_schema.str_schema(strict=True), to_text], mode="left_to_right")
        return text if none is not None else core_schema.nullable_schema(text)


OptStr = Annotated[str | None, _Text(None)]
Str = Annotated[str, _Text("")]
Time = Annotated[datetime | None, BeforeValidator(_to_time)]
Type = Annotated[UpdateType, BeforeValidator(_to_update_type)]


def _tag_map(value: Any) -> Any:
    """`{"1": "Name"}`, `[]` or `""` -> `{1: "Name"}` / `{}`."""
    value = _decode_json(value)
    if not value:
        return {}
    if isinstance(value, list):
        return {int(tag["id"]): str(tag.get("name", "")) for tag in value if isinstance(tag, dict) and "id" in tag}
    return value


def _id_list(value: Any) -> Any:
    """`"1,4"`, `null`, `""` or `[1, 4]` -> `[1, 4]`."""
    value = _blank_to_none(value)
    if value is None:
        return []
    if isinstance(value, str):
        return [int(part) for part in value.split(",") if part.strip()]
    return value


def _none_if_zero(value: Any) -> Any:
    value = _to_int(value)
    return None if value == 0 else value


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=False)


M = TypeVar("M", bound=BaseModel)


@cache
def _list_of(model: type[M]) -> TypeAdapter[list[M]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def valid_rows(model: type[M], rows: Any) -> list[M]:
    """The rows that validate as `model`. A bad row is logged (with its site or id when it has one) and
    skipped, so that one odd record does not sink a whole listing."""
    if not isinstance(rows, list):
        raise ValueError(f"expected a list of {model.__name__}, got {type(rows).__name__}")
    try:  # the whole list at once, in pydantic-core, is the cheap common case
        return _list_of(model).validate_python(rows)
    except ValidationError:
        pass  # some row is bad: go row by row to skip and name it
    kept: list[M] = []
    for index, row in enumerate(rows):
        try:
            kept.append(row if isinstance(row, model) else model.model_validate(row))
        except ValidationError as exc:
            # Only ids that are numbers: a v1 key's `id` is its secret consumer key.
            where = {k: row.get(k) for k in ("site_id", "id", "slug") if isinstance(row, dict) and k in row
                     and (k == "slug" or str(row.get(k)).isdigit())}
            first = exc.errors()[0]
            log.warning("skipped %s row %d %s: %s: %s", model.__name__, index, where or "",
                        ".".join(map(str, first["loc"])), first["msg"])
    return kept


def decoded_on_read(raw_field: str) -> Any:
    """A read-only field: `raw_field` decoded as JSON text (bad text is None, `""` nothing) on first read, then
    kept. Listing 10,000 sites then costs nothing for big JSON-text fields nobody reads."""

    def decode(model: BaseModel) -> Any:
        return _decode_json(getattr(model, raw_field))

    return computed_field(cached_property(decode))


def lenient(model: type[M]) -> Any:
    """`list[model]` that skips (and logs) rows that do not validate."""
    return Annotated[list[model], BeforeValidator(lambda rows: valid_rows(model, rows))]  # type: ignore[valid-type]


# ---------------------------------------------------------------- sites


class Site(Model):
    """A child site, from REST v2 (`/sites`), the abilities (SiteB / SiteF) or legacy v1."""

    id: Int
    url: Str
    name: Str = ""
    status: OptStr = None
    client_id: Annotated[int | None, BeforeValidator(_none_if_zero)] = None
    tags: Annotated[dict[int, str], BeforeValidator(_tag_map)] = Field(default_factory=dict)
    wp_version: OptStr = None
    php_version: OptStr = None
    child_version: OptStr = None
    last_sync: Time = None
    health_score: OptInt = None
    http_status: OptStr = None
    sync_errors: OptStr = None
    suspended: Bool = False
    ip: OptStr = None  # the child's server address: MainWP's per-IP connection limits key on it
    admin_username: OptStr = None
    notes: OptStr = Field(None, validation_alias=AliasChoices("notes", "note"))
    stats: dict[str, Any] | None = None
    # The JSON-text fields as sent (`Site(plugins=...)` and dumps use the plain names below).
    raw_plugins: Any = Field(None, validation_alias="plugins", exclude=True, repr=False)
    raw_themes: Any = Field(None, validation_alias="themes", exclude=True, repr=False)
    raw_wp_upgrades: Any = Field(None, validation_alias="wp_upgrades", exclude=True, repr=False)
    raw_plugin_upgrades: Any = Field(None, validation_alias="plugin_upgrades", exclude=True, repr=False)
    raw_theme_upgrades: Any = Field(None, validation_alias="theme_upgrades", exclude=True, repr=False)
    raw_translation_upgrades: Any = Field(None, validation_alias="translation_upgrades", exclude=True, repr=False)

    plugins = decoded_on_read("raw_plugins")
    themes = decoded_on_read("raw_themes")
    wp_upgrades = decoded_on_read("raw_wp_upgrades")
    plugin_upgrades = decoded_on_read("raw_plugin_upgrades")
    theme_upgrades = decoded_on_read("raw_theme_upgrades")
    translation_upgrades = decoded_on_read("raw_translation_upgrades")


class ConnectionLimits(Model):
    """MainWP's own limits on its calls to child sites (`GET /settings/advanced`), with its defaults; 0 is no limit.

    `MainWP_Connect::check_constraints` holds every sync and plugin/theme/translation update to them, on every
    PHP worker and cron chunk at once."""

    maximum_requests: Int = Field(4, validation_alias="mainwp_maximum_requests", ge=0)
    minimum_delay_ms: Int = Field(200, validation_alias="mainwp_minimum_delay", ge=0)
    maximum_ip_requests: Int = Field(1, validation_alias="mainwp_maximum_ip_requests", ge=0)
    minimum_ip_delay_ms: Int = Field(1000, validation_alias="mainwp_minimum_ip_delay", ge=0)


class SiteRef(Model):
    """The `{id, url, name}` of a site in batch results."""

    id: OptInt = None
    url: Str = ""
    name: Str = ""


class SiteCheck(Model):
    """`POST /sites/{id}/check`: `status` is 1 only for HTTP 200."""

    id: Int
    url: Str = ""
    name: Str = ""
    status: OptInt = None
    http_code: OptInt = None

    @property
    def online(self) -> bool:
        return self.status == 1


class SitePlugin(Model):
    """An installed plugin or theme (`/sites/{id}/plugins`, `/themes`)."""

    slug: Str
    name: Str = ""
    version: OptStr = None
    active: Bool = False
    update_version: OptStr = None


class BatchSiteError(Model):
    """One site a multi-site ability could not use (unknown, refused, offline)."""

    identifier: OptStr = None
    site_id: OptInt = None
    site_url: OptStr = None
    code: Str = ""
    message: Str = ""
    status: OptInt = None


class SyncResult(Model):
    """Immediate `sync-sites-v1` answer."""

    synced: list[SiteRef] = Field(default_factory=list)
    errors: list[BatchSiteError] = Field(default_factory=list)
    total_synced: OptInt = None
    total_errors: OptInt = None


class OnlineStatus(Model):
    online: Bool = False
    http_code: OptInt = None
    response_time: OptFloat = None


class CheckedSite(SiteRef):
    status: OnlineStatus | None = None


class CheckResult(Model):
    """Immediate `check-sites-v1` answer."""

    checked: list[CheckedSite] = Field(default_factory=list)
    errors: list[BatchSiteError] = Field(default_factory=list)
    total_checked: OptInt = None
    total_errors: OptInt = None


class SiteHealth(Model):
    """`check-site-v1`: one site's reachability."""

    site_id: Int
    response_time: OptFloat = None
    checked: Bool = False
    status: OnlineStatus | None = None


# ---------------------------------------------------------------- updates


class SiteItem(Model):
    """An update item (core, plugin, theme or translation) of one site, as every update answer names it."""

    site_id: Int
    site_url: Str = ""
    site_name: Str = ""
    type: Type
    slug: Str
    name: Str = ""


class PendingUpdate(SiteItem):
    """One pending update on one site (`/updates`, `list-updates-v1`, `get-site-updates-v1`)."""

    current_version: OptStr = None
    new_version: OptStr = None


class IgnoredUpdate(SiteItem):
    """One entry of a global or per-site ignore list (`list-ignored-updates-v1`)."""

    ignored_version: OptStr = None


class UpdatedItem(SiteItem):
    """An item an update call reports as done. `old_version == ""` means nothing was installed."""

    old_version: OptStr = None
    new_version: OptStr = None


class RolledBackUpdate(Model):
    """A version WordPress rolled back on one site, as MainWP remembers it (`rollback_plugins`/`rollback_themes` of
    the site's update detail) while that version is still the one offered."""

    type: Type
    slug: Str
    name: Str = ""
    old_version: OptStr = None
    version: OptStr = None


def rolled_back_updates(detail: Any) -> list[RolledBackUpdate]:
    """The rollbacks in a site's update detail; a shape that is not a slug-keyed object is read as none."""
    if not isinstance(detail, dict):
        return []
    found = []
    for key, kind in (("rollback_plugins", UpdateType.plugin), ("rollback_themes", UpdateType.theme)):
        remembered = detail.get(key)
        if isinstance(remembered, dict):
            found += [{**record, "type": kind, "slug": slug} for slug, record in remembered.items()
                      if isinstance(record, dict)]
    return valid_rows(RolledBackUpdate, found)


class UpdateError(Model):
    """An item or site an update call reports as failed; `type` is `site` for a site that was not found."""

    site_id: OptInt = None
    site_url: Str = ""
    site_name: Str = ""
    type: Str = ""
    slug: Str = ""
    code: Str = ""
    message: Str = ""


class UpdateSummary(Model):
    total_updated: Int = 0
    total_errors: Int = 0
    sites_updated: OptInt = None


class UpdateRunResult(Model):
    """Immediate answer of `run-updates-v1`, `update-all-v1` and `update-site-*-v1`."""

    updated: lenient(UpdatedItem) = Field(default_factory=list)
    errors: lenient(UpdateError) = Field(default_factory=list)
    summary: UpdateSummary = Field(default_factory=UpdateSummary)


class UpdateListPage(Model):
    """One page of `list-updates-v1`."""

    updates: lenient(PendingUpdate) = Field(default_factory=list)
    page: Int = 1
    per_page: Int = 50
    total: Int = 0
    errors: lenient(UpdateError) = Field(default_factory=list)


class SiteUpdates(Model):
    """`get-site-updates-v1`."""

    site_id: Int
    site_url: Str = ""
    site_name: Str = ""
    updates: lenient(PendingUpdate) = Field(default_factory=list)


class IgnoredList(Model):
    """`list-ignored-updates-v1`."""

    ignored: lenient(IgnoredUpdate) = Field(default_factory=list)
    total: Int = 0
    errors: lenient(UpdateError) = Field(default_factory=list)


class ItemUpdateResult(Model):
    """One item of a REST per-site update (`POST /updates/{id}/update/{type}`)."""

    slug: Str
    type: Type
    success: Bool = False
    name: Str = ""
    old_version: OptStr = None
    version: OptStr = None
    error: OptStr = None

    @property
    def installed(self) -> bool:
        """Really moved. A "success" with no old version, or an unchanged one, installed nothing (the child
        answered "up to date"); translations never report an old version, so their success is taken."""
        if not self.success:
            return False
        if self.type is UpdateType.translation:
            return True
        return bool(self.old_version) and self.old_version != self.version


class SiteItemsUpdate(Model):
    """REST per-site update answer, one entry per item.

    The real dashboard reports a failed plugin twice (under the URL-encoded key with the error, and under
    the plain key with the versions); the two are merged here. Core answers `{old_version, version}` for
    the one item `wordpress`.
    """

    site: str
    type: Type
    items: list[ItemUpdateResult] = Field(default_factory=list)

    @classmethod
    def from_body(cls, site: str, update_type: UpdateType, body: dict[str, Any]) -> SiteItemsUpdate:
        data = body.get("data") or {}
        if update_type is UpdateType.core and isinstance(data, dict) and "version" in data:
            data = {"wordpress": {"success": body.get("success", 1), "name": "WordPress", **data}}
        merged: dict[str, dict[str, Any]] = {}
        if isinstance(data, dict):
            for key, value in data.items():
                if not isinstance(value, dict):
                    continue
                slug = unquote(str(key))
                entry = merged.setdefault(slug, {"slug": slug, "type": update_type})
                for field, field_value in value.items():
                    if field_value not in ("", None) or field not in entry:
                        entry[field] = field_value
        return cls(site=site, type=update_type, items=[ItemUpdateResult.model_validate(v) for v in merged.values()])


class IgnoreResult(Model):
    """`ignore-site-{core,plugins,themes}-v1`."""

    success: Bool = False
    message: Str = ""
    ignored_count: Int = 0


class PluginSwitchError(Model):
    """A plugin the child could not (de)activate (`mainwp_activation_failed`, `mainwp_deactivation_failed`)."""

    slug: Str = ""
    code: Str = ""
    message: Str = ""


class PluginSwitch(Model):
    """`activate-site-plugins-v1` / `deactivate-site-plugins-v1`: the plugins switched, and those that failed."""

    activated: lenient(SitePlugin) = Field(default_factory=list)
    deactivated: lenient(SitePlugin) = Field(default_factory=list)
    errors: lenient(PluginSwitchError) = Field(default_factory=list)

    @property
    def switched(self) -> list[str]:
        return [plugin.slug for plugin in self.activated + self.deactivated]


# ---------------------------------------------------------------- batch jobs


class JobState(StrEnum):
    queued = "queued"
    processing = "processing"
    completed = "completed"
    failed = "failed"


class JobSiteError(Model):
    site_id: OptInt = None
    code: Str = ""
    message: Str = ""


class JobStatus(Model):
    """`get-batch-job-status-v1`. `failed` in the dashboard only comes from its 4-hour timeout."""

    job_id: Str
    type: Str = ""
    status: JobState
    progress: Int = 0
    processed: Int = 0
    total: Int = 0
    succeeded: Int = 0
    failed: Int = 0
    started_at: Time = None
    completed_at: Time = None
    errors: list[JobSiteError] = Field(default_factory=list)
    job_timed_out: Bool = False
    job_error_code: OptStr = None
    job_error_message: OptStr = None

    @property
    def finished(self) -> bool:
        return self.status in (JobState.completed, JobState.failed)


R = TypeVar("R", bound=Model)


class BatchStart(Model, Generic[R]):
    """The answer of a batch-capable ability: either the immediate `result`, or a queued `job_id`."""

    queued: bool
    job_id: str | None = None
    sites: int | None = Field(None, description="Sites queued (sites_queued, updates_queued or total).")
    errors: list[BatchSiteError] = Field(
        default_factory=list, description="Sites refused when queueing; an immediate result has its own errors."
    )
    result: R | None = None
    elapsed: float | None = Field(None, description="Seconds the dashboard took to answer (set by the client).")

    @classmethod
    def parse(cls, body: Any, result_model: type[R]) -> BatchStart[R]:
        if not isinstance(body, dict):
            raise ValueError("batch answer is not an object")
        model = _parametrized(cls, result_model)
        if body.get("queued") is True:
            count = next((body[k] for k in ("sites_queued", "updates_queued", "total") if k in body), None)
            errors = [BatchSiteError.model_validate(e) for e in body.get("errors") or [] if isinstance(e, dict)]
            return model(queued=True, job_id=str(body["job_id"]), sites=_to_int(count), errors=errors)
        return model(queued=False, result=result_model.model_validate(body))


@cache
def _parametrized(generic: type[BatchStart[Any]], result_model: type[R]) -> type[BatchStart[R]]:
    """`generic[result_model]`, kept for good: pydantic holds parametrized models weakly, so one whose last
    answer was garbage-collected was built again for the next answer, at milliseconds each."""
    return generic[result_model]  # type: ignore[index]


# ---------------------------------------------------------------- tags, clients, monitors, keys


class Tag(Model):
    """A tag from REST v2 (strings, `count_sites`, `sites_ids` as `"1,4"`) or the abilities (ints)."""

    id: Int
    name: Str
    color: Annotated[str | None, BeforeValidator(_blank_to_none)] = None
    sites_count: OptInt = Field(None, validation_alias=AliasChoices("sites_count", "count_sites"))
    sites_ids: Annotated[list[int], BeforeValidator(_id_list)] = Field(default_factory=list)


class Client(Model):
    """A dashboard client (REST rows use `client_email`/`client_phone`, the abilities `email`/`phone`)."""

    id: Int = Field(validation_alias=AliasChoices("id", "client_id"))
    name: Str
    email: OptStr = Field(None, validation_alias=AliasChoices("email", "client_email"))
    phone: OptStr = Field(None, validation_alias=AliasChoices("phone", "client_phone"))
    suspended: Bool = False
    created: Time = None
    note: OptStr = None


class Monitor(Model):
    """An uptime monitor. The phantom monitor of a dashboard without monitor rows has id 0 or `""`."""

    id: OptInt = None
    url: Str = ""
    name: OptStr = None
    type: OptStr = None
    last_status: OptStr = None
    check_frequency: OptStr = None
    last_check_at: Time = None
    last_status_code: OptInt = None
    uptime_ratio_7d: OptFloat = None
    uptime_ratio_30d: OptFloat = None
    incidents_count_7d: OptInt = None
    incidents_count_30d: OptInt = None


class Heartbeat(Model):
    monitor_id: Int
    heartbeat_id: Int
    status: Int
    msg: Str = ""
    importance: OptInt = None
    time: Time = None
    ping_ms: OptInt = None
    http_code: OptInt = None


class Incident(Model):
    started_at: Time = None
    ended_at: Time = None
    duration_sec: OptInt = None
    resolved: Bool = False
    down_count: OptInt = None


class MonitorCheck(Model):
    http_code: OptInt = None
    uptime_status: OptStr = None


class ApiKey(Model):
    """A key as listed by `/rest-api/keys`. v1 keys carry the plaintext consumer key as `id`: kept secret."""

    id: SecretStr
    version: Str = ""
    description: Str = ""
    permissions: list[str] = Field(default_factory=list)
    truncated_key: OptStr = None
    active: Bool = False
    user_id: OptInt = None
    last_access: Time = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        return str(value)

    @field_validator("permissions", mode="before")
    @classmethod
    def _permissions(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part for part in value.split(",") if part]
        return [html.unescape(str(p)) for p in value or []]

    @property
    def key_id(self) -> int | None:
        """The numeric id of a v2 key (None for v1 keys, whose id is the secret consumer key)."""
        raw = self.id.get_secret_value()
        return int(raw) if raw.isdigit() else None


class NewApiKey(Model):
    """`add-key`: the bearer token is shown once; there is no key id in the answer."""

    message: Str = ""
    token: SecretStr


class ActionMessage(Model):
    """The `{success, message}` of a write whose answer carries nothing else of use."""

    success: Bool = True
    message: Str = ""


# ---------------------------------------------------------------- abilities


class Annotations(Model):
    readonly: Bool = False
    destructive: Bool = False
    idempotent: Bool = False
    instructions: Str = ""


class Ability(Model):
    name: Str
    label: Str = ""
    description: Str = ""
    category: Str = ""
    input_schema: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    annotations: Annotations = Field(default_factory=Annotations)

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Ability:
        data = dict(body)
        meta = data.get("meta") or {}
        data["annotations"] = meta.get("annotations") or {} if isinstance(meta, dict) else {}
        for key in ("input_schema", "output_schema"):
            if not isinstance(data.get(key), dict):
                data[key] = None
        return cls.model_validate(data)

    @property
    def run_method(self) -> str:
        """The HTTP method `/run` requires, as WordPress derives it from the annotations."""
        if self.annotations.readonly:
            return "GET"
        if self.annotations.destructive and self.annotations.idempotent:
            return "DELETE"
        return "POST"

    @property
    def safe_to_retry(self) -> bool:
        return self.annotations.readonly or self.annotations.idempotent

    @property
    def max_per_page(self) -> int | None:
        per_page = ((self.input_schema or {}).get("properties") or {}).get("per_page") or {}
        maximum = per_page.get("maximum") if isinstance(per_page, dict) else None
        return int(maximum) if isinstance(maximum, int | float) else None


class AbilityCategory(Model):
    slug: Str
    label: Str = ""
    description: Str = ""
