"""The policy file: which pending updates the pipeline may apply, and why the others wait.

A policy is YAML or TOML, validated by pydantic (unknown keys are errors, so a typo never silently turns a
rule off). `decide` answers one question per item: apply it, or which rule stopped it and why.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from fleet.model.summary import Outcome, UpdateType
from fleet.model.wordpress_version import VersionPin, release_numbers
from fleet.rules.windows import Blackout, Windows
from fleet.visual.policy import VisualPolicy

_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+$")
_ITEM_REF = re.compile(r"^\s*(?:(?P<type>[a-z]+):)?\s*(?P<slug>[^<>=!~\s,]+)\s*(?P<pin>.*?)\s*$")


class PolicyError(ValueError):
    """A policy file that cannot be used, with the file, the field and the reason."""


class SemverRule(StrEnum):
    """The largest version change applied without a person looking: patch < minor < major."""

    patch = "patch"
    minor = "minor"
    major = "major"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {name: rank for rank, name in enumerate(SemverRule)}


class ContainMode(StrEnum):
    """What the night does with a site a plugin update broke while its MainWP Child still answers."""

    deactivate = "deactivate"  # find the culprit by deactivating halves of the step's plugins; leave it off
    report = "report"  # touch nothing: report the site broken with the step's suspects


class Rule(StrEnum):
    """The names that appear as `rule` on every item that was not applied."""

    types = "types"
    hold = "hold"
    allow_list = "allow_list"
    semver = "semver"
    min_age = "min_age"
    ignore_list = "ignore_list"
    selection = "selection"
    site_status = "site_status"
    rollout = "rollout"
    night_hold = "night_hold"
    rolled_back = "rolled_back"  # MainWP remembers WordPress rolling this version back on this site
    rolled_back_elsewhere = "rolled_back_elsewhere"  # ... on another site
    window = "window"
    blackout = "blackout"
    approval = "approval"


@dataclass(frozen=True)
class ItemRef:
    """`slug`, `type:slug` or a plugin folder (`woocommerce` matches `woocommerce/woocommerce.php`)."""

    slug: str
    type: UpdateType | None = None

    @classmethod
    def parse(cls, text: str) -> tuple[ItemRef, str]:
        """Split `plugin:woocommerce < 9.0` into the reference and the remaining pin text."""
        match = _ITEM_REF.match(text)
        if not match:
            raise ValueError(f"{text!r} is not an item reference (slug, or type:slug)")
        kind = match["type"]
        if kind is not None and kind not in UpdateType.__members__:
            raise ValueError(f"{kind!r} is not an update type (one of {', '.join(UpdateType)})")
        return cls(match["slug"].lower(), UpdateType(kind) if kind else None), match["pin"]

    def matches(self, type_: UpdateType, slug: str, name: str = "") -> bool:
        if self.type is not None and self.type != type_:
            return False
        slug = slug.lower()
        return self.slug in (slug, slug.split("/", 1)[0], name.lower())


def _parse_ref(value: Any) -> ItemRef:
    if isinstance(value, ItemRef):
        return value
    ref, rest = ItemRef.parse(str(value))
    if rest:
        raise ValueError(f"{value!r}: a version pin is only allowed in a hold")
    return ref


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hold(_Strict):
    """Do not apply an item (or only keep it inside a version pin) for a reason, optionally until a date."""

    item: str = Field(description="`slug` or `type:slug`, optionally followed by a pin such as `< 9.0`.")
    reason: str = Field(min_length=1, description="Why it is held; shown in the report.")
    expires: date | None = Field(None, description="The hold lapses on this date.")
    pin: str | None = Field(None, description="Version specifier the item must stay within, e.g. `< 9.0`.")
    _ref: ItemRef = PrivateAttr()
    _pin: VersionPin | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _parse(self) -> Hold:
        ref, inline_pin = ItemRef.parse(self.item)
        if inline_pin and self.pin:
            raise ValueError("give the version pin either in `item` or in `pin`, not both")
        pin = inline_pin or self.pin
        self._ref, self._pin = ref, VersionPin.parse(pin) if pin else None
        return self

    @property
    def ref(self) -> ItemRef:
        return self._ref

    @property
    def version_pin(self) -> VersionPin | None:
        return self._pin

    def active(self, today: date) -> bool:
        return self.expires is None or today < self.expires

    def holds_version(self, to_version: str | None) -> bool:
        """True when this hold stops an update to `to_version` (always, without a pin)."""
        return self._pin is None or not self._pin.allows(to_version)


class ItemRules(_Strict):
    """Rules for one item, overriding the general ones."""

    semver: SemverRule | None = None
    min_age_days: int | None = Field(None, ge=0)


class Rules(_Strict):
    """A set of rules; in an override every field left out keeps the value from the level above."""

    types: dict[UpdateType, bool] | None = Field(None, description="Update types on (true) or off (false).")
    semver: SemverRule | None = Field(None, description="Largest version change applied: patch, minor or major.")
    min_age_days: int | None = Field(None, ge=0, description="Apply an update only once it has been seen N days.")
    allow_list: bool | None = Field(None, description="When true, only the items listed in `allow` are applied.")
    allow: list[str] | None = Field(None, description="Items for allow-list mode (`slug` or `type:slug`).")
    holds: list[Hold] = Field(default_factory=list, description="Holds; overrides add to the holds above.")
    items: dict[str, ItemRules] = Field(default_factory=dict, description="Per-item semver and minimum age.")

    @field_validator("allow")
    @classmethod
    def _check_allow(cls, value: list[str] | None) -> list[str] | None:
        for entry in value or []:
            _parse_ref(entry)
        return value

    @field_validator("items")
    @classmethod
    def _check_items(cls, value: dict[str, ItemRules]) -> dict[str, ItemRules]:
        for key in value:
            _parse_ref(key)
        return value


class Rollout(_Strict):
    """Staged rollout: cohorts run in order; a cohort over its failure budget stops the ones after it."""

    cohorts: list[str] = Field(
        min_length=1, description="In order: `tag:NAME`, `client:NAME`, `site:ID_OR_DOMAIN`, `N%`, `rest`."
    )
    failure_budget: int | str = Field(
        0, description="Failed sites a cohort may have before the rollout stops: a count or a percentage."
    )

    @field_validator("cohorts")
    @classmethod
    def _check_cohorts(cls, value: list[str]) -> list[str]:
        for position, cohort in enumerate(value):
            kind, _, rest = cohort.partition(":")
            if cohort == "rest":
                if position != len(value) - 1:
                    raise ValueError("`rest` must be the last cohort")
            elif cohort.endswith("%"):
                try:
                    share = float(cohort[:-1])
                except ValueError:
                    raise ValueError(f"{cohort!r} is not a percentage") from None
                if not 0 < share <= 100:
                    raise ValueError(f"{cohort!r}: a percentage must be over 0 and at most 100")
            elif kind not in ("tag", "client", "site") or not rest.strip():
                raise ValueError(f"{cohort!r} is not a cohort (tag:NAME, client:NAME, site:ID, N% or rest)")
        if len(set(value)) != len(value):
            raise ValueError("cohorts must be distinct")
        return value

    @field_validator("failure_budget")
    @classmethod
    def _check_budget(cls, value: int | str) -> int | str:
        if isinstance(value, str):
            try:
                share = float(value.rstrip("%")) if value.endswith("%") else None
            except ValueError:
                share = None
            if share is None or not 0 <= share <= 100:
                raise ValueError(f"{value!r}: give a count of sites or a percentage such as `10%`")
        elif value < 0:
            raise ValueError("the failure budget cannot be negative")
        return value

    def budget_for(self, sites: int) -> int:
        """Failed sites allowed in a cohort of `sites` sites."""
        if isinstance(self.failure_budget, int):
            return self.failure_budget
        return int(sites * float(self.failure_budget.rstrip("%")) / 100)


_DURATION = re.compile(r"^\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s)?\s*$")


RATINGS = ("low", "medium", "high", "critical")


class SecurityLane(_Strict):
    """Updates that fix a known vulnerability (the vulnerability feed): at or above the threshold, they go past
    `min_age_days` and closed maintenance windows (never past a blackout, a hold or an ignore rule), still through
    the staged rollout, the checks and containment."""

    min_cvss: float = Field(0.0, ge=0, le=10, description="The lowest CVSS score a fix must have (0: any).")
    min_rating: str | None = Field(None, description="Or the lowest rating: low, medium, high or critical.")
    windows: bool = Field(False, description="true: fixes wait for the site's maintenance window like the rest.")
    min_age: bool = Field(False, description="true: fixes wait for `min_age_days` like the rest.")
    approval: bool = Field(False, description="true: each fix waits for a person at the night's approval gate.")

    @field_validator("min_rating")
    @classmethod
    def _known_rating(cls, value: str | None) -> str | None:
        if value is not None and value.lower() not in RATINGS:
            raise ValueError(f"must be one of {', '.join(RATINGS)}")
        return value.lower() if value else None

    def counts(self, score: float | None, rating: str | None) -> bool:
        """A vulnerability at or above the threshold (one of unknown severity counts: it may be the worst)."""
        if score is not None and score < self.min_cvss:
            return False
        if self.min_rating and rating and rating.lower() in RATINGS:
            return RATINGS.index(rating.lower()) >= RATINGS.index(self.min_rating)
        return True


class Approval(_Strict):
    """What a person must approve at the night's gate before it is applied; the rest runs unattended."""

    semver: SemverRule | None = Field(
        None, description="Changes of this size or larger wait for a person (`major`: only major versions)."
    )
    items: list[str] = Field(default_factory=list, description="Items that always wait (`slug` or `type:slug`).")
    tags: list[str] = Field(default_factory=list, description="Every update on sites with one of these tags waits.")
    timeout: timedelta = Field(
        timedelta(hours=6), description="How long the gate waits (`6h`, `90m`, seconds); then nothing is applied."
    )

    @field_validator("items")
    @classmethod
    def _check_items(cls, value: list[str]) -> list[str]:
        for entry in value:
            _parse_ref(entry)
        return value

    @field_validator("timeout", mode="before")
    @classmethod
    def _parse_timeout(cls, value: Any) -> Any:
        if isinstance(value, str) and (match := _DURATION.match(value)) and any(match.groups()):
            hours, minutes, seconds = (int(part or 0) for part in match.groups())
            return timedelta(hours=hours, minutes=minutes, seconds=seconds)
        return value

    @field_validator("timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("the approval timeout must be longer than zero")
        return value

    def needs(self, type_: UpdateType, slug: str, name: str, from_version: str | None, to_version: str | None,
              tags: Iterable[str]) -> str | None:
        """Why this update waits for a person, or None when it may run unattended."""
        if any(_parse_ref(entry).matches(type_, slug, name) for entry in self.items):
            return f"{name or slug} is on the policy's approval list"
        wanted = {tag.lower() for tag in self.tags}
        tagged = sorted(tag for tag in tags if tag.lower() in wanted)
        if tagged:
            return f"sites tagged {tagged[0]!r} need approval"
        if self.semver is not None and type_ is not UpdateType.translation:
            change = version_change(from_version, to_version)
            if change is not None and change.rank >= self.semver.rank:
                return f"{change} update {from_version} -> {to_version} needs approval"
        return None


class Overrides(_Strict):
    """Rules per tag, per client and per site; a site's own rules win over its client's, which win over tags."""

    tags: dict[str, Rules] = Field(default_factory=dict)
    clients: dict[str, Rules] = Field(default_factory=dict)
    sites: dict[str, Rules] = Field(default_factory=dict, description="Keyed by site id or domain.")


class Policy(Rules):
    """The whole policy file: general rules, overrides, staged rollout, windows, approvals, report recipients."""

    overrides: Overrides = Field(default_factory=Overrides)
    rollout: Rollout | None = None
    windows: Windows | None = Field(None, description="Maintenance windows; none means any time.")
    blackouts: list[Blackout] = Field(default_factory=list, description="Dates when nothing is touched.")
    approval: Approval | None = Field(None, description="What waits for a person at the night's approval gate.")
    security: SecurityLane = Field(default_factory=SecurityLane, description="Updates that fix a known "
                                   "vulnerability: the threshold, and whether windows, min_age_days or a person "
                                   "still hold them.")
    recipients: dict[str, list[str]] = Field(
        default_factory=dict, description="Report recipients per client name, replacing the client's e-mail."
    )
    reply_to: dict[str, str] = Field(
        default_factory=dict, description="Where a client's replies to its report go, per client name (the "
        "message's Reply-To; FLEET_REPLY_TO for the others).",
    )
    mail_clients_when_broken: bool = Field(
        False, description="Send a client the automatic e-mail even when the night broke one of its sites "
        "(by default it is held for the operator's review).",
    )
    check_all_sites: bool = Field(
        False, description="Check every site with planned work after the updates, not only the sites something "
        "was applied to (as FLEET_CHECK_ALL_SITES; either one turns it on).",
    )
    hold_after_failures: int = Field(
        3, ge=0, description="Hold a version fleet-wide from the next night once it failed on this many sites "
        "in one night (0: failures alone never hold; a version that broke a site is always held).",
    )
    hold_quiet_days: int = Field(
        30, ge=1, description="A version the nights hold ends by itself once no open incident names it and "
        "whole-fleet nights on this many days saw it offered nowhere (a night over a selection, with sites outside "
        "their window or with failed syncs does not count); `fleet holds release` ends it at once.",
    )

    contain: ContainMode = Field(
        ContainMode.deactivate, description="A site a plugin update broke while its MainWP Child answers: find the "
        "culprit and leave it deactivated (deactivate), or only report the site broken (report).",
    )
    visual: VisualPolicy | None = Field(
        None, description="Screenshot the pages of the sites with planned updates before the first update and "
        "after each step, and judge what changed (`visual: {}` for the defaults); none: HTTP probes only.",
    )
    never_deactivate: list[str] = Field(
        default_factory=list, description="Plugins never deactivated to contain a break (a slug such as "
        "woocommerce/woocommerce.php, or its folder, woocommerce): their error page is better than running without "
        "them.",
    )

    @field_validator("never_deactivate")
    @classmethod
    def _check_never_deactivate(cls, value: list[str]) -> list[str]:
        if any(not slug.strip() for slug in value):
            raise ValueError("a plugin slug must not be empty")
        return [slug.strip() for slug in value]

    def may_deactivate(self, slug: str) -> bool:
        """Whether containment may deactivate this plugin (named by its slug or its folder)."""
        folder = slug.split("/", 1)[0]
        return not any(protected in (slug, folder) for protected in self.never_deactivate)

    @field_validator("recipients")
    @classmethod
    def _check_recipients(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for client, addresses in value.items():
            for address in addresses:
                if not _EMAIL.match(address):
                    raise ValueError(f"{address!r} (client {client!r}) is not an e-mail address")
        return value

    @field_validator("reply_to")
    @classmethod
    def _check_reply_to(cls, value: dict[str, str]) -> dict[str, str]:
        for client, address in value.items():
            if not _EMAIL.match(address):
                raise ValueError(f"{address!r} (client {client!r}) is not an e-mail address")
        return value

    def rules_for(self, site_keys: Iterable[str], tags: Iterable[str], client: str | None) -> EffectiveRules:
        """The rules that govern one site: general, then its tags, its client, then the site itself."""
        return self.merged(self.overrides_for(site_keys, tags, client))

    def overrides_for(self, site_keys: Iterable[str], tags: Iterable[str], client: str | None) -> OverrideNames:
        """The names of the overrides that apply to one site (most sites share the same few, or none)."""
        tag_names = {tag.lower() for tag in tags}
        keys = {key.lower() for key in site_keys}
        return (
            tuple(name for name in self.overrides.tags if name.lower() in tag_names),
            tuple(name for name in self.overrides.clients if client is not None and name.lower() == client.lower()),
            tuple(name for name in self.overrides.sites if name.lower() in keys),
        )

    def merged(self, names: OverrideNames) -> EffectiveRules:
        tags, clients, sites = names
        return EffectiveRules.merge([self, *(self.overrides.tags[name] for name in tags),
                                     *(self.overrides.clients[name] for name in clients),
                                     *(self.overrides.sites[name] for name in sites)])


OverrideNames = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


@dataclass(frozen=True)
class PolicyDecision:
    """Why an item is not applied: the outcome it gets, the rule, a readable reason, a date when relevant."""

    outcome: Outcome
    rule: Rule
    reason: str
    until: date | None = None


_CHANGE_NAMES = ("major", "minor", "patch")


def version_change(from_version: str | None, to_version: str | None) -> SemverRule | None:
    """The size of a version change, on the leading numbers PHP reads in each (None when either has none)."""
    old, new = release_numbers(from_version or ""), release_numbers(to_version or "")
    if not old or not new:
        return None
    old_parts, new_parts = (old + (0, 0, 0))[:3], (new + (0, 0, 0))[:3]
    for index, name in enumerate(_CHANGE_NAMES):
        if old_parts[index] != new_parts[index]:
            return SemverRule(name)
    return SemverRule.patch


@dataclass(frozen=True)
class EffectiveRules:
    """The merged rules for one site, ready to decide items."""

    types: dict[UpdateType, bool]
    semver: SemverRule
    min_age_days: int
    allow_list: bool
    allow: tuple[ItemRef, ...]
    holds: tuple[Hold, ...]
    items: tuple[tuple[ItemRef, ItemRules], ...]

    @classmethod
    def merge(cls, layers: list[Rules]) -> EffectiveRules:
        types = dict.fromkeys(UpdateType, True)
        semver, min_age, allow_list, allow = SemverRule.major, 0, False, []
        holds: list[Hold] = []
        items: list[tuple[ItemRef, ItemRules]] = []
        for layer in layers:
            types.update(layer.types or {})
            semver = layer.semver or semver
            min_age = layer.min_age_days if layer.min_age_days is not None else min_age
            allow_list = layer.allow_list if layer.allow_list is not None else allow_list
            allow = layer.allow if layer.allow is not None else allow
            holds += layer.holds
            # later layers first, so that the most specific item rule is found first
            items = [(_parse_ref(key), rules) for key, rules in layer.items.items()] + items
        return cls(types, semver, min_age, allow_list, tuple(_parse_ref(a) for a in allow), tuple(holds), tuple(items))

    def _item_rule(self, type_: UpdateType, slug: str, name: str, field: str) -> Any:
        for ref, rules in self.items:
            value = getattr(rules, field)
            if value is not None and ref.matches(type_, slug, name):
                return value
        return None

    def decide(
        self,
        type_: UpdateType,
        slug: str,
        name: str,
        from_version: str | None,
        to_version: str | None,
        first_seen: date,
        today: date,
    ) -> PolicyDecision | None:
        """None to apply the item, else the first rule that stops it."""
        label = name or slug
        if not self.types.get(type_, True):
            return PolicyDecision(Outcome.excluded, Rule.types, f"{type_} updates are turned off by the policy")
        for hold in self.holds:
            if hold.active(today) and hold.ref.matches(type_, slug, name) and hold.holds_version(to_version):
                pin = f" (pinned {hold.version_pin})" if hold.version_pin else ""
                return PolicyDecision(Outcome.held, Rule.hold, f"held: {hold.reason}{pin}", hold.expires)
        if self.allow_list and not any(ref.matches(type_, slug, name) for ref in self.allow):
            return PolicyDecision(Outcome.excluded, Rule.allow_list, f"{label} is not on the policy's allow-list")
        if type_ is not UpdateType.translation:
            limit = self._item_rule(type_, slug, name, "semver") or self.semver
            change = version_change(from_version, to_version)
            if change is None and limit is not SemverRule.major:
                return PolicyDecision(
                    Outcome.excluded,
                    Rule.semver,
                    f"cannot compare versions {from_version!r} -> {to_version!r} under the {limit} rule",
                )
            if change is not None and change.rank > limit.rank:
                return PolicyDecision(
                    Outcome.excluded,
                    Rule.semver,
                    f"{change} update {from_version} -> {to_version} exceeds the {limit} rule",
                )
        min_age = self._item_rule(type_, slug, name, "min_age_days")
        min_age = self.min_age_days if min_age is None else min_age
        eligible = first_seen + timedelta(days=min_age)
        if today < eligible:
            age = (today - first_seen).days
            return PolicyDecision(
                Outcome.delayed,
                Rule.min_age,
                f"first seen {first_seen.isoformat()} ({age} of {min_age} days)",
                eligible,
            )
        return None


def client_names(policy: Policy) -> list[tuple[str, str]]:
    """Every client the policy names, with where: (`recipients`, name), (`rollout.cohorts`, name), ..."""
    named = [("recipients", name) for name in policy.recipients]
    named += [("reply_to", name) for name in policy.reply_to]
    named += [("overrides.clients", name) for name in policy.overrides.clients]
    if policy.windows is not None:
        named += [("windows.clients", name) for name in policy.windows.clients]
    named += [(f"blackouts.{position}.clients", name)
              for position, blackout in enumerate(policy.blackouts) for name in blackout.clients or []]
    if policy.rollout is not None:
        named += [("rollout.cohorts", cohort.partition(":")[2].strip())
                  for cohort in policy.rollout.cohorts if cohort.startswith("client:")]
    return named


def check_client_names(policy: Policy, clients: Iterable[str], source: Path | None = None) -> None:
    """Raise `PolicyError` naming the policy file and every place in it that names a client the dashboard does
    not have (a typo there would otherwise send no report, or apply no rule, without a word)."""
    known = {name.lower() for name in clients}
    unknown: dict[str, list[str]] = {}
    for key, name in client_names(policy):
        if name.lower() not in known and name not in unknown.setdefault(key, []):
            unknown[key].append(name)
    problems = [f"{key}: the dashboard has no client named {', '.join(repr(name) for name in names)}"
                for key, names in unknown.items() if names]
    if problems:
        raise PolicyError((f"{source}: " if source else "") + "; ".join(problems))


def _format_error(path: Path, error: ValidationError) -> str:
    lines = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = _unknown_key(problem["loc"])
        lines.append(f"{path}: {where}: {message}")
    return "\n".join(lines)


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    """A key no policy setting has at that place, with the nearest one that does (`min_age_day`: min_age_days)."""
    model = _model_at(Policy, loc[:-1])
    known = sorted(model.model_fields) if model is not None else []
    nearest = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if nearest:
        return f"not a policy setting here: did you mean {nearest[0]}?"
    return f"not a policy setting here (one of: {', '.join(known)})" if known else "not a policy setting"


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model a key at `loc` belongs to, following fields, list positions and mapping keys (None: no model)."""
    annotation: Any = model
    for part in loc:
        annotation = _plain(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation = field.annotation
        elif get_origin(annotation) in (list, tuple) and isinstance(part, int):
            annotation = get_args(annotation)[0]
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        else:
            return None
    annotation = _plain(annotation)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _plain(annotation: Any) -> Any:
    """`X | None` as X; a union of a model and something else as the model."""
    options = [arg for arg in get_args(annotation) if arg is not type(None)] if get_origin(annotation) in (
        Union, UnionType) else [annotation]
    models = [arg for arg in options if isinstance(arg, type) and issubclass(arg, BaseModel)]
    return models[0] if models else options[0]


def parse_policy(data: Any, source: Path = Path("<policy>")) -> Policy:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PolicyError(f"{source}: the policy must be a mapping of settings, not {type(data).__name__}")
    try:
        return Policy.model_validate(data)
    except ValidationError as error:
        raise PolicyError(_format_error(source, error)) from None


class _PolicyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a date YAML itself cannot build (`expires: 2026-13-45`) stays text: the
    policy's validation then names its field, instead of the parser failing with a traceback."""


def _date_or_text(loader: yaml.SafeLoader, node: yaml.Node) -> object:
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_timestamp(loader, node)
    except ValueError:
        return loader.construct_scalar(node)


_PolicyLoader.add_constructor("tag:yaml.org,2002:timestamp", _date_or_text)


def load_policy(path: Path) -> Policy:
    """Read and validate a policy file; raise `PolicyError` naming the field and the reason."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PolicyError(f"{path}: cannot read the policy file ({error.strerror})") from None
    try:
        if path.suffix.lower() == ".toml":
            data: Any = tomllib.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            data = yaml.load(text, Loader=_PolicyLoader)  # noqa: S506 - a SafeLoader with a lenient date
        else:
            raise PolicyError(f"{path}: a policy file must end in .yaml, .yml or .toml")
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as error:
        raise PolicyError(f"{path}: not valid {path.suffix.lstrip('.').upper()}: {error}") from None
    return parse_policy(data, path)
