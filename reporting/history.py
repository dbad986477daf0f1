"""Earlier runs for the trends: the summaries found in sibling run directories."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from fleet.summary import SUMMARY_FILE, Summary

log = logging.getLogger(__name__)
HEAD_BYTES = 4096
# summary.json is written by Summary.write: these scalar fields come first, before the long item list.
_HEAD_FIELD = re.compile(rb'^\s*"(started_at|dry_run|dashboard)": ("(?:[^"\\]|\\.)*"|true|false|null),?$', re.M)


class RunHead(NamedTuple):
    started_at: datetime
    dry_run: bool
    dashboard: str | None


def as_utc(moment: datetime) -> datetime:
    """Summaries should carry aware times; a naive one is taken as UTC rather than failing a comparison."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def read_head(path: Path) -> RunHead:
    """When, what kind and which dashboard, from the first bytes of a summary (a year of nightly summaries of
    a large fleet is gigabytes); the whole file is parsed only if the head does not say."""
    with path.open("rb") as file:
        fields = {m[1].decode(): json.loads(m[2]) for m in _HEAD_FIELD.finditer(file.read(HEAD_BYTES))}
    if {"started_at", "dry_run", "dashboard"} <= fields.keys():
        return RunHead(as_utc(datetime.fromisoformat(fields["started_at"])), fields["dry_run"], fields["dashboard"])
    summary = Summary.read(path)
    return RunHead(as_utc(summary.started_at), summary.dry_run, summary.dashboard)


def earlier_runs(run_dir: Path, current: Summary, runs: int) -> list[Path]:
    """The summaries of the `runs - 1` runs before `current`, oldest first.

    Only runs of the same dashboard and the same kind (dry or real) count; unreadable summaries are
    logged and skipped, so one damaged night never hides the trend.
    """
    here = run_dir.resolve()
    started = as_utc(current.started_at)
    candidates: list[tuple[datetime, Path]] = []
    for path in here.parent.glob(f"*/{SUMMARY_FILE}"):
        if path.parent == here:
            continue
        try:
            head = read_head(path)
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("trend: skipping %s: %s", path, str(exc).splitlines()[0])
            continue
        if head.started_at < started and head.dashboard == current.dashboard and head.dry_run == current.dry_run:
            candidates.append((head.started_at, path))
    return [path for _, path in sorted(candidates)[-(runs - 1) :]] if runs > 1 else []


def read_earlier(path: Path) -> Summary | None:
    try:
        return Summary.read(path)
    except (OSError, ValueError, ValidationError) as exc:
        log.warning("trend: skipping %s: %s", path, str(exc).splitlines()[0])
        return None
