"""Earlier runs for the trends: the summaries found in sibling run directories."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel

from fleet.model.summary import SUMMARY_FILE, Selection
from reporting.rows import PastRun, read_fields, read_past, summary_path

log = logging.getLogger(__name__)
HEAD_BYTES = 4096  # summary.json is written by Summary.write: these fields come first, before the long lists
DRY_RUN_BEFORE = timedelta(hours=24)  # a dry run this long before a night rehearsed it (the afternoon before)


class RunHead(BaseModel):
    """When, what kind, which dashboard and sites: what decides whether a run belongs in another's trend, or
    rehearsed it."""

    started_at: datetime
    dry_run: bool = False
    dashboard: str | None = None
    selection: Selection = Selection()


def as_utc(moment: datetime) -> datetime:
    """Summaries should carry aware times; a naive one is taken as UTC rather than failing a comparison."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def read_head(path: Path) -> RunHead:
    """The head of a summary, reading no further than its fields (a year of nightly summaries of a large fleet
    is gigabytes)."""
    head = RunHead.model_validate(read_fields(summary_path(path), set(RunHead.model_fields), chunk=HEAD_BYTES))
    return head.model_copy(update={"started_at": as_utc(head.started_at)})


def earlier_runs(run_dir: Path, current: RunHead, runs: int) -> list[Path]:
    """The summaries of the `runs - 1` runs before `current`, oldest first.

    Only runs of the same dashboard and the same kind (dry or real) count; unreadable summaries are
    logged and skipped, so one damaged night never hides the trend.
    """
    candidates = [(head.started_at, path) for head, path in _siblings(run_dir)
                  if head.started_at < current.started_at
                  and (head.dashboard, head.dry_run) == (current.dashboard, current.dry_run)]
    return [path for _, path in sorted(candidates)[-(runs - 1) :]] if runs > 1 else []


def dry_run_before(run_dir: Path, current: RunHead) -> Path | None:
    """The summary of the last dry run of the same dashboard and selection in the day before a real night: the
    rehearsal its report says it differed from (None for a dry run, or when there was none)."""
    if current.dry_run:
        return None
    found = [(head.started_at, path) for head, path in _siblings(run_dir)
             if head.dry_run and (head.dashboard, head.selection) == (current.dashboard, current.selection)
             and current.started_at - DRY_RUN_BEFORE <= head.started_at < current.started_at]
    return max(found)[1] if found else None


def _siblings(run_dir: Path) -> Iterator[tuple[RunHead, Path]]:
    """The heads of the summaries in the run's sibling directories; an unreadable one is logged and skipped, so
    one damaged night never hides the others."""
    here = run_dir.resolve()
    for path in here.parent.glob(f"*/{SUMMARY_FILE}"):
        if path.parent == here:
            continue
        try:
            yield read_head(path), path
        except (OSError, ValueError) as exc:
            log.warning("trend: skipping %s: %s", path, str(exc).splitlines()[0])


def read_earlier(path: Path) -> PastRun | None:
    try:
        return read_past(path)
    except (OSError, ValueError) as exc:
        log.warning("trend: skipping %s: %s", path, str(exc).splitlines()[0])
        return None
