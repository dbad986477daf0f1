"""The nights so far, as `fleet runs` lists them: each run directory's summary read for its head, counts, alarms
and deliveries only (the long lists are streamed past, never held: a year of a large fleet's nights is gigabytes)."""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from fleet.model.summary import SUMMARY_FILE, Counts, Delivery, NightHold, Outcome, SiteAlarm, run_directories
from reporting.history import as_utc
from reporting.rows import read_fields

log = logging.getLogger(__name__)
READ_CHUNK = 1 << 16


class NightRecord(BaseModel):
    """What one run left in its summary that says how the night went."""

    run_id: str
    started_at: datetime
    finished_at: datetime
    dry_run: bool = False
    dashboard: str | None = None
    broken: list[SiteAlarm] = Field(default_factory=list)
    already_down: list[SiteAlarm] = Field(default_factory=list)
    holds: list[NightHold] = Field(default_factory=list)
    counts: Counts = Field(default_factory=Counts)
    deliveries: list[Delivery] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    interrupted: bool = False
    did_nothing: str | None = None
    directory: Path = Path()

    @property
    def status(self) -> str:
        """The night in a few words, as its exit code says it."""
        if self.interrupted:
            return "interrupted"
        if self.broken:
            return f"broke {len(self.broken)}"
        if self.did_nothing:
            return "did nothing"
        return "dry run" if self.dry_run else "completed"

    @property
    def delivered(self) -> str:
        """Reports that reached their recipients (held for review and `.eml` files are not delivered)."""
        sent = [d for d in self.deliveries if not d.held and d.eml_path is None]
        return f"{sum(d.accepted for d in sent)}/{len(self.deliveries)}" if self.deliveries else "-"

    def count(self, outcome: Outcome) -> int:
        return self.counts.by_outcome.get(outcome, 0)

    @property
    def report(self) -> Path:
        return self.directory / "report" / "operator.html"


def read_night(directory: Path) -> NightRecord:
    fields = set(NightRecord.model_fields) - {"directory"}
    found = read_fields(directory / SUMMARY_FILE, fields, chunk=READ_CHUNK)
    record = NightRecord.model_validate({**found, "directory": directory})
    return record.model_copy(update={"started_at": as_utc(record.started_at)})


def recent_nights(report_dir: Path, limit: int) -> list[NightRecord]:
    """The newest `limit` runs under `report_dir`, newest first (run ids sort by time); a damaged summary is
    logged and left out, never hiding the others."""
    nights = []
    for directory in reversed(run_directories(report_dir)[-limit:]):
        try:
            nights.append(read_night(directory))
        except (OSError, ValueError) as error:
            log.warning("runs: skipping %s: %s", directory, str(error).splitlines()[0])
    return nights


def matching_nights(report_dir: Path, wanted: str) -> list[Path]:
    """The run directories `wanted` names: a path, a run id, the start of one (several if it is ambiguous), or
    `last` for the newest run."""
    if (Path(wanted) / SUMMARY_FILE).is_file():
        return [Path(wanted)]
    runs = run_directories(report_dir)
    if wanted == "last":
        return runs[-1:]
    return [path for path in runs if path.name == wanted] or [path for path in runs if path.name.startswith(wanted)]
