"""The two keys a night knows an update by: one item on one site (`ItemKey`), and one release of an item wherever
it is offered (`VersionKey`). Types are `UpdateType`s or their text: a StrEnum equals and hashes as its text, so
keys built either way find each other."""

from __future__ import annotations

from typing import Protocol

ItemKey = tuple[int, str, str]  # (site id, type, slug)
VersionKey = tuple[str, str, str]  # (type, slug, version)


class ItemOnSite(Protocol):
    @property
    def site_id(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def slug(self) -> str: ...


class Offered(Protocol):
    """An update to a version: a plan item, a summary item, an incident's suspect."""

    @property
    def type(self) -> str: ...
    @property
    def slug(self) -> str: ...
    @property
    def to_version(self) -> str | None: ...


def item_key(item: ItemOnSite) -> ItemKey:
    return item.site_id, item.type, item.slug


def offered_key(item: Offered) -> VersionKey:
    """The release an update goes to (an unknown version is the empty text, never a match for a real one)."""
    return item.type, item.slug, item.to_version or ""
