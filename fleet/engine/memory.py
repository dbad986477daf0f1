"""The memory a night reads and writes across nights, opened in one place: the state home's continuity (said
before anything), the job journal, MainWP's rollback reads and the visual baselines of the dashboard, and the state
database the vulnerability feed's copy and the exposure live in."""

from __future__ import annotations

from pathlib import Path

from fleet.model.settings import PipelineSettings
from fleet.state.continuity import check_state_home
from fleet.state.job_journal import JobJournal
from fleet.state.rollback_reads import RollbackReads
from fleet.state.visual_baselines import VisualBaselines


class NightMemory:
    """Opened once per night, before the dashboard is reached; told the dashboard once it is."""

    def __init__(self, settings: PipelineSettings) -> None:
        self.state_path: Path = settings.state_path  # the feed's copy and the exposure: `review_vulnerabilities`
        self.notes = check_state_home(settings)  # a home moved or forgotten: said before anything is read
        self.journal = JobJournal(settings.state_path)
        self.dashboard = ""
        self.rollback_reads: RollbackReads | None = None
        self.rollback_sites: frozenset[int] | None = None

    def of_dashboard(self, dashboard: str) -> None:
        """The dashboard's own memory: the sites MainWP is asked tonight which versions WordPress rolled back
        (None: every site, no night of this dashboard recorded yet)."""
        self.dashboard = dashboard
        self.rollback_reads = RollbackReads(self.state_path, dashboard)
        self.rollback_sites = self.rollback_reads.sites()

    def visual_baselines(self) -> VisualBaselines:
        """A healthy night's last shots and learned noise masks of the dashboard's pages."""
        return VisualBaselines(self.state_path.parent, self.dashboard)
