"""Earlier runs for the trends: the summaries found in sibling run directories."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from fleet.summary import SUMMARY_FILE, Summary

log = logging.getLogger(__name__)


def as_utc(moment: datetime) -> datetime:
    """Summaries should carry aware times; a naive one is taken as UTC rather than failing a comparison."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def load_history(run_dir: Path, current: Summary, runs: int) -> list[Summary]:
    """The last `runs` runs up to and including `current`, oldest first.

    Only runs of the same dashboard and the same kind (dry or real) count; unreadable summaries are
    logged and skipped, so one damaged night never hides the trend.
    """
    earlier: list[Summary] = []
    for path in sorted(run_dir.resolve().parent.glob(f"*/{SUMMARY_FILE}")):
        if path.parent == run_dir.resolve():
            continue
        try:
            summary = Summary.read(path)
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("trend: skipping %s: %s", path, str(exc).splitlines()[0])
            continue
        if (
            as_utc(summary.started_at) < as_utc(current.started_at)
            and summary.dashboard == current.dashboard
            and summary.dry_run == current.dry_run
        ):
            earlier.append(summary)
    earlier.sort(key=lambda s: as_utc(s.started_at))
    return [*earlier[-(runs - 1) :], current] if runs > 1 else [current]
