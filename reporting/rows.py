"""summary.json as the reports read it: streamed, with items and sites as slotted rows rather than pydantic models.

A 10,000-site summary holds 50,000 items: parsed whole into `Item` models it takes ~140 MB; streamed into rows
that share their repeated strings, about a tenth of it. The rows have the fields and types of `fleet.model.summary`
that the reports use, and pydantic validates them by the same rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from itertools import islice
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from fleet.model.summary import SUMMARY_FILE, HealthCheck, LastSync, Outcome, SiteLook, Summary, UpdateType
from fleet.model.vulnerability import ItemVulnerabilities
from reporting.json_stream import ObjectStream

BATCH = 2000  # array elements validated at a time


class SummaryError(ValueError):
    """summary.json could not be read; the message names the file and what was wrong."""


@dataclass(slots=True)
class ItemRow:
    """An `Item` without the fields no report shows."""

    site_id: int
    site_url: str
    site_name: str
    type: UpdateType
    slug: str
    name: str
    outcome: Outcome
    client: str | None = None
    from_version: str | None = None
    to_version: str | None = None
    reason: str | None = None
    rule: str | None = None
    until: date | None = None
    suspect: bool = False
    security: ItemVulnerabilities | None = None  # what the update fixes or leaves open (the vulnerability feed)
    fix_waited_hours: float | None = None  # a security fix installed tonight: hours since first offered


@dataclass(slots=True)
class TrendItem:
    """What the trends need of an earlier run's item."""

    type: UpdateType
    slug: str
    name: str
    outcome: Outcome
    client: str | None = None
    rule: str | None = None  # a dry run's items it would apply are counted by it


@dataclass(slots=True)
class SiteRow:
    site_id: int
    site_url: str
    site_name: str
    client: str | None = None
    status: str = "online"
    check: HealthCheck | None = None  # a Record: light enough as it is
    deferred: str | None = None  # outside its window or in a blackout: why
    opens_at: datetime | None = None
    revived: bool = False  # refused as known offline, answered a check tonight and was maintained


class ReportSummary(Summary):
    """The run being reported."""

    items: list[ItemRow] = []
    sites: list[SiteRow] = []


class PastRun(BaseModel):
    """An earlier run, for the trends."""

    run_id: str
    started_at: datetime
    items: list[TrendItem] = []


@dataclass(slots=True)
class PlannedItem:
    """What a night's comparison needs of a dry run's item: which it is, and whether it would be applied."""

    site_id: int
    type: UpdateType
    slug: str
    rule: str | None = None


class DryRun(BaseModel):
    """The dry run a night is compared with."""

    run_id: str
    started_at: datetime
    last_sync: LastSync | None = None
    items: list[PlannedItem] = []


def summary_path(run_dir: Path) -> Path:
    return run_dir / SUMMARY_FILE if run_dir.is_dir() else run_dir


def _sharing_decoder() -> json.JSONDecoder:
    """A decoder that gives equal strings one object: site names and URLs repeat once per item."""
    shared: dict[str, str] = {}

    def members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        return {key: shared.setdefault(value, value) if type(value) is str else value for key, value in pairs}

    return json.JSONDecoder(object_pairs_hook=members)


def _batches(elements: Iterable[Any]) -> Iterator[list[Any]]:
    elements = iter(elements)
    while batch := list(islice(elements, BATCH)):
        yield batch


def _rows(key: str, elements: Iterable[Any], adapter: TypeAdapter[list[Any]],
          lean: Callable[[Any], Any] | None = None) -> list[Any]:
    """Validated a batch at a time (each row made `lean` as it comes); a fault is named by its place in the
    whole array."""
    rows: list[Any] = []
    for batch in _batches(elements):
        try:
            valid = adapter.validate_python(batch)
            rows += map(lean, valid) if lean is not None else valid
        except ValidationError as error:
            fault = error.errors()[0]
            index, *field = fault["loc"]
            more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
            raise SummaryError(f"{key}[{len(rows) + int(index)}]{''.join(f'.{f}' for f in field)}: {fault['msg']}, "
                               f"got {repr(fault['input'])[:80]}{more}") from None  # fmt: skip
    return rows


def _read(path: Path, model: type[BaseModel], arrays: dict[str, type],
          lean: dict[str, Callable[[Any], Any]] | None = None) -> Any:
    """Validate `model` from the file, the `arrays` members streamed into rows of the given types (each made
    lean by `lean[key]` as it is read, when given)."""
    values: dict[str, Any] = {}
    adapters = {key: TypeAdapter(list[row]) for key, row in arrays.items()}
    try:
        with path.open("rb") as file:
            stream = ObjectStream(file, decoder=_sharing_decoder())
            for key in stream.members():
                if key in adapters:
                    values[key] = _rows(key, stream.elements(), adapters[key], (lean or {}).get(key))
                elif key in model.model_fields:
                    values[key] = stream.value()
        return model.model_validate(values)
    except ValueError as error:  # pydantic's ValidationError is one
        raise SummaryError(f"{path}: {error}") from None


def read_summary(run_dir: Path, lean_look: Callable[[SiteLook], SiteLook] | None = None) -> ReportSummary:
    """The run being reported; `lean_look` keeps of each site's look only what the reports show."""
    return _read(summary_path(run_dir), ReportSummary, {"items": ItemRow, "sites": SiteRow, "looks": SiteLook},
                 {"looks": lean_look} if lean_look is not None else None)


def read_past(path: Path) -> PastRun:
    return _read(summary_path(path), PastRun, {"items": TrendItem})


def read_dry_run(path: Path) -> DryRun:
    return _read(summary_path(path), DryRun, {"items": PlannedItem})


def read_fields(path: Path, fields: set[str], *, chunk: int) -> dict[str, Any]:
    """The named top-level members, reading no further than the last of them."""
    found: dict[str, Any] = {}
    with path.open("rb") as file:
        stream = ObjectStream(file, chunk=chunk)
        for key in stream.members():
            if key in fields:
                found[key] = stream.value()
                if found.keys() >= fields:
                    break
    return found

