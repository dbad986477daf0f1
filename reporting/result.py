"""What a report run produced, apart from the rendering itself: what a flow returns and the CLI reads, without
loading the report's libraries (pandas, matplotlib) to name it."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from fleet.model.summary import Delivery, Incident, SiteAlarm


class ReportDeliveryError(RuntimeError):
    """At least one report did not reach a recipient; the message names which and why."""


class ReportResult(BaseModel):
    """What a report run produced: the files written, the deliveries made, and what went wrong."""

    run_id: str
    run_dir: Path
    reports: list[str] = Field(description="'operator' and the client names, in render order.")
    files: list[Path] = Field(default_factory=list)
    deliveries: list[Delivery] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    broken: list[SiteAlarm] = Field(default_factory=list, description="The sites the run broke.")
    did_nothing: str | None = Field(None, description="Why the night did nothing it was there to do.")
    still_down: list[Incident] = Field(default_factory=list, description="Sites broken on earlier nights and "
                                       "still down.")

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_for_problems(self) -> None:
        if self.problems:
            raise ReportDeliveryError(f"run {self.run_id}: " + "; ".join(self.problems))


def undelivered(deliveries: list[Delivery]) -> list[Delivery]:
    """The deliveries that reached nobody: a `.eml` fallback or a report held for review is not one."""
    return [d for d in deliveries if not d.accepted and d.eml_path is None and not d.held]


def delivery_problems(deliveries: list[Delivery]) -> list[str]:
    """Every recipient a report should have reached and did not, in words."""
    return [f"{d.report} report to {d.recipient or '(nobody)'} not delivered: {d.answer}"
            for d in undelivered(deliveries)]
