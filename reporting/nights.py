"""The nights so far, as `fleet runs` lists them: each run directory's summary read for its head, counts, alarms
and deliveries only (the long lists are streamed past, never held: a year of a large fleet's nights is gigabytes)."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from fleet.model.summary import (
    SUMMARY_FILE,
    Counts,
    Delivery,
    Incident,
    NightHold,
    Outcome,
    SiteAlarm,
    run_directories,
)
from fleet.model.vocabulary import Voice, operator_voice, said_outcome
from fleet.rules.incidents import still_down
from reporting.history import as_utc
from reporting.json_stream import ObjectStream
from reporting.result import undelivered
from reporting.rows import read_fields

log = logging.getLogger(__name__)
READ_CHUNK = 1 << 16


class NightRecord(BaseModel):
    """What one run left in its summary that says how the night went."""

    run_id: str
    started_at: datetime
    finished_at: datetime
    dry_run: bool = False
    security_run: bool = False
    dashboard: str | None = None
    broken: list[SiteAlarm] = Field(default_factory=list)
    already_down: list[SiteAlarm] = Field(default_factory=list)
    incidents: list[Incident] = Field(default_factory=list)
    holds: list[NightHold] = Field(default_factory=list)
    counts: Counts = Field(default_factory=Counts)
    deliveries: list[Delivery] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    interrupted: bool = False
    did_nothing: str | None = None
    directory: Path = Path()
    said: dict[Outcome, int] = Field(default_factory=dict, description="Items by outcome as the reports count "
                                     "them (a dry run's items it would apply: updated, said `would update`).")

    @property
    def still_down(self) -> list[Incident]:
        """Sites broken on earlier nights still down at this night's end (what exits 8)."""
        return [] if self.dry_run else still_down(self.incidents, self.run_id)

    @property
    def open_incidents(self) -> list[Incident]:
        return [incident for incident in self.incidents if incident.is_open]

    @property
    def down(self) -> int:
        """Sites down at the night's end: those its open incidents find down, and those down before it."""
        return len({i.site_id for i in self.open_incidents if i.down} | {a.site_id for a in self.already_down})

    @property
    def undelivered(self) -> list[Delivery]:
        """Reports that reached nobody, as the report step fails on them."""
        return undelivered(self.deliveries)

    @property
    def status(self) -> str:
        """The night in a few words, as its exit code says it: broke (7), still down (8), did nothing (9),
        reports not delivered (1), failed (a step failed), completed (0)."""
        if self.interrupted:
            return "interrupted"
        if self.broken:
            return f"broke {len(self.broken)}"
        if self.still_down:
            return f"still down {len(self.still_down)}"
        if self.did_nothing:
            return "did nothing"
        if self.undelivered:
            return "not sent"
        if self.errors:
            return "failed"
        return "dry run" if self.dry_run else "completed"

    @property
    def delivered(self) -> str:
        """Reports that reached their recipients, of those sent (held for review and `.eml` files are not sent:
        written as `.eml` on purpose, with no SMTP host, is not "0 sent"): `3/4`, `.eml`, `held`, or `-`."""
        sent = [d for d in self.deliveries if not d.held and d.eml_path is None]
        if sent:
            return f"{sum(d.accepted for d in sent)}/{len(sent)}"
        if any(d.eml_path for d in self.deliveries):
            return ".eml"
        return "held" if self.deliveries else "-"

    @property
    def voice(self) -> Voice:
        return operator_voice(self.dry_run)

    @property
    def done(self) -> int:
        """Updated, or in a dry run what it would update, as the reports count it."""
        return self.voice.total(self.said, self.voice.done)

    @property
    def not_updated(self) -> int:
        """Everything found and not updated, the failed included, as the reports count it."""
        return sum(self.said.values()) - self.done

    @property
    def attention(self) -> int:
        """Tried and not updated: the reports' "failed"."""
        return self.voice.total(self.said, self.voice.attention)

    @property
    def report(self) -> Path:
        return self.directory / "report" / "operator.html"


def read_night(directory: Path) -> NightRecord:
    fields = set(NightRecord.model_fields) - {"directory", "said"}
    found = read_fields(directory / SUMMARY_FILE, fields, chunk=READ_CHUNK)
    record = NightRecord.model_validate({**found, "directory": directory})
    said = dry_run_counts(directory / SUMMARY_FILE) if record.dry_run else dict(record.counts.by_outcome)
    return record.model_copy(update={"started_at": as_utc(record.started_at), "said": said})


def dry_run_counts(path: Path) -> dict[Outcome, int]:
    """A dry run's items by outcome as the reports count them: its counts file them under `excluded` (nothing was
    applied), the words under `updated` ("would update"). Its items streamed past, one at a time."""
    said: Counter[Outcome] = Counter()
    with path.open("rb") as file:
        stream = ObjectStream(file, chunk=READ_CHUNK)
        for key in stream.members():
            if key == "items":
                for item in stream.elements():
                    said[said_outcome(Outcome(item["outcome"]), item.get("rule"))] += 1
                break
    return dict(said)


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
