"""Earlier runs for the trends: the summaries found in sibling run directories."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from fleet.model.summary import SUMMARY_FILE
from reporting.rows import PastRun, read_fields, read_past, summary_path

log = logging.getLogger(__name__)
HEAD_BYTES = 4096  # summary.json is written by Summary.write: these fields come first, before the long lists


class RunHead(BaseModel):
    """When, what kind and which dashboard: what decides whether a run belongs in another's trend."""

    started_at: datetime
    dry_run: bool = False
    dashboard: str | None = None


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
    here = run_dir.resolve()
    candidates: list[tuple[datetime, Path]] = []
    for path in here.parent.glob(f"*/{SUMMARY_FILE}"):
        if path.parent == here:
            continue
        try:
            head = read_head(path)
        except (OSError, ValueError) as exc:
            log.warning("trend: skipping %s: %s", path, str(exc).splitlines()[0])
            continue
        if head.started_at < current.started_at and (head.dashboard, head.dry_run) == (current.dashboard,
                                                                                        current.dry_run):
            candidates.append((head.started_at, path))
    return [path for _, path in sorted(candidates)[-(runs - 1) :]] if runs > 1 else []


def read_earlier(path: Path) -> PastRun | None:
    try:
        return read_past(path)
    except (OSError, ValueError) as exc:
        log.warning("trend: skipping %s: %s", path, str(exc).splitlines()[0])
        return None
