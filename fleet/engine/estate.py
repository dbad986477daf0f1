"""The estate: one night over many dashboards, combined from what each dashboard's night wrote.

Plain logic, no Prefect: the fan-out flow (`flows.dashboards`) hands over what became of each dashboard's flow
run, and this module reads that night's `summary.json` (tolerant of fields added or missing) and adds it all
up. `estate.json` is what the combined report is rendered from.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter

from fleet.model.summary import DRY_RUN_RULE, SUMMARY_FILE, Outcome, run_suffix, write_atomically

ESTATE_FILE = "estate.json"
OPERATOR_REPORT = "report/operator.html"


class NightStatus(StrEnum):
    completed = "completed"  # the night's flow run completed
    failed = "failed"  # the flow run ended Failed or Crashed (its summary, if written, is still counted)
    unreachable = "unreachable"  # the dashboard did not answer before the night: no flow run was started
    busy = "busy"  # another night of this dashboard held its lock: no second one was started
    not_started = "not_started"  # the flow run could not be created (unknown deployment, no block, ...)


def write_limit_name(block: str) -> str:
    """The global concurrency limit every write call of this dashboard's nights occupies (its budget)."""
    return f"fleet-dashboard-{block}"


class Tally(BaseModel):
    """One dashboard's night in numbers; `None` means the summary does not record that figure."""

    sites: int = 0
    items: int = 0
    updated: int = 0
    failed: int = 0
    broken: int | None = None
    deferred: int | None = None
    by_outcome: dict[str, int] = Field(default_factory=dict)
    errors: int = 0
    dry_run: bool = False


def _count(value: Any) -> int | None:
    if isinstance(value, list):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def tally_summary(summary: dict[str, Any]) -> Tally:
    """Count a `summary.json` as read (an untrusted, possibly older or newer shape).

    `broken` (sites the night broke: the top-level list) and `deferred` (sites left alone by their maintenance
    window: `sites[].deferred`) are counted only where the summary records them; an older summary without them
    shows "n/a", never an invented 0. Outcomes are counted from the items when the counts are missing.
    """
    items = summary.get("items") if isinstance(summary.get("items"), list) else []
    counts = (summary.get("counts") or {}).get("by_outcome") if isinstance(summary.get("counts"), dict) else None
    if not isinstance(counts, dict) or not counts:
        counts = {}
        for item in items:
            outcome = item.get("outcome") if isinstance(item, dict) else None
            if isinstance(outcome, str):
                counts[outcome] = counts.get(outcome, 0) + 1
    by_outcome = {str(name): n for name, n in counts.items() if isinstance(n, int) and n >= 0}
    dry_run = summary.get("dry_run") is True
    would = sum(1 for item in items if isinstance(item, dict) and item.get("rule") == DRY_RUN_RULE) if dry_run else 0
    excluded, updated = Outcome.excluded.value, Outcome.updated.value
    if would and by_outcome.get(excluded, 0) >= would:  # counted as the words say them: "would update"
        by_outcome[excluded] -= would
        by_outcome[updated] = by_outcome.get(updated, 0) + would
    sites = summary.get("sites")
    site_rows = [site for site in sites if isinstance(site, dict)] if isinstance(sites, list) else []
    recorded = any("deferred" in site for site in site_rows)
    deferred = sum(1 for site in site_rows if site.get("deferred")) if recorded else None
    errors = summary.get("errors")
    return Tally(
        sites=len(sites) if isinstance(sites, list) else 0,
        items=len(items) or sum(by_outcome.values()),
        updated=by_outcome.get("updated", 0),
        failed=by_outcome.get("failed", 0),
        broken=_count(summary.get("broken")),
        deferred=deferred,
        by_outcome=by_outcome,
        errors=len(errors) if isinstance(errors, list) else 0,
        dry_run=dry_run,
    )


def find_run_dir(report_dir: Path, flow_run_id: str, marker: str = SUMMARY_FILE) -> Path | None:
    """The run directory a flow run wrote `marker` into under `report_dir`: run ids end in `run_suffix` of the
    flow run id (`flows.update.run_identity`)."""
    suffix = f"-{run_suffix(flow_run_id)}"
    if not report_dir.is_dir():
        return None
    found = sorted(p for p in report_dir.iterdir() if p.name.endswith(suffix) and (p / marker).is_file())
    return found[-1] if found else None


class DashboardNight(BaseModel):
    """What became of one dashboard's night."""

    block: str
    status: NightStatus
    message: str | None = Field(None, description="Why it failed, was not started, or the state's message.")
    base_url: str | None = None
    flow_run_id: str | None = None
    flow_run_name: str | None = None
    state: str | None = Field(None, description="The flow run's final Prefect state name.")
    run_dir: str | None = None
    tally: Tally | None = None

    @property
    def operator_report(self) -> Path | None:
        if not self.run_dir:
            return None
        path = Path(self.run_dir) / OPERATOR_REPORT
        return path if path.is_file() else None


def read_night(
    block: str,
    *,
    status: NightStatus,
    report_dir: Path,
    flow_run_id: str | None = None,
    flow_run_name: str | None = None,
    state: str | None = None,
    message: str | None = None,
    base_url: str | None = None,
    summary_expected: bool = True,
) -> DashboardNight:
    """The night of `block` with its summary counted, if its flow run wrote one (a failed night may have; a
    security run with nothing to apply writes none, so it is not `summary_expected`)."""
    run_dir = find_run_dir(report_dir, flow_run_id) if flow_run_id else None
    tally = None
    if run_dir:
        try:
            raw = json.loads((run_dir / SUMMARY_FILE).read_bytes())
            tally = tally_summary(raw) if isinstance(raw, dict) else None
        except (OSError, ValueError) as error:
            message = f"{message + '; ' if message else ''}its summary.json could not be read: {error}"
    if status is NightStatus.completed and run_dir is None and summary_expected:
        status, message = NightStatus.failed, f"the flow run completed but wrote no summary.json under {report_dir}"
    return DashboardNight(block=block, status=status, message=message, base_url=base_url, flow_run_id=flow_run_id,
                          flow_run_name=flow_run_name, state=state, run_dir=str(run_dir) if run_dir else None,
                          tally=tally)


class Estate(BaseModel):
    """Every dashboard's night, in the order the operator asked for them."""

    run_id: str
    started_at: datetime
    finished_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    dry_run: bool = False
    nights: list[DashboardNight] = Field(default_factory=list)

    @property
    def totals(self) -> Tally:
        """The whole estate's figures; broken and deferred stay `None` unless some night recorded them."""
        tallies = [night.tally for night in self.nights if night.tally]
        by_outcome: dict[str, int] = {}
        for tally in tallies:
            for outcome, n in tally.by_outcome.items():
                by_outcome[outcome] = by_outcome.get(outcome, 0) + n

        def optional(name: str) -> int | None:
            values = [getattr(tally, name) for tally in tallies if getattr(tally, name) is not None]
            return sum(values) if values else None

        return Tally(
            sites=sum(t.sites for t in tallies), items=sum(t.items for t in tallies),
            updated=sum(t.updated for t in tallies), failed=sum(t.failed for t in tallies),
            broken=optional("broken"), deferred=optional("deferred"), by_outcome=by_outcome,
            errors=sum(t.errors for t in tallies), dry_run=self.dry_run,
        )

    @property
    def problems(self) -> list[str]:
        """One line per dashboard whose night did not complete, naming it and why."""
        return [
            f"{night.block}: {night.status.value}" + (f" ({night.message})" if night.message else "")
            for night in self.nights
            if night.status is not NightStatus.completed
        ]

    @property
    def ok(self) -> bool:
        return not self.problems

    def write(self, directory: Path) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        return write_atomically(directory / ESTATE_FILE, _ESTATE_JSON.dump_json(self, indent=2))

    @classmethod
    def read(cls, directory: Path) -> Estate:
        path = directory / ESTATE_FILE if directory.is_dir() else directory
        return cls.model_validate_json(path.read_bytes())


_ESTATE_JSON = TypeAdapter(Estate)
