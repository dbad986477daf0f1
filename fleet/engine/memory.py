"""The memory a run reads and writes across runs, opened in one place from the dashboard's address: the home's
continuity and the dashboard's own memory (said before anything is read), the job journal, MainWP's rollback reads
and the visual baselines. The settings it hands on point every store at this dashboard's database, and the
vulnerability feed's copy at the home's."""

from __future__ import annotations

from pathlib import Path

from fleet.model.settings import PipelineSettings
from fleet.state.continuity import adopt_legacy_state, forgotten_holds
from fleet.state.dashboard_memory import DashboardMemory
from fleet.state.job_journal import JobJournal
from fleet.state.rollback_reads import RollbackReads
from fleet.state.visual_baselines import VisualBaselines


class NightMemory:
    """Opened once per run, once the dashboard's address is known and before any request is sent."""

    def __init__(self, settings: PipelineSettings, dashboard: str) -> None:
        place = DashboardMemory(settings.home_state_path, dashboard)
        self.dashboard = dashboard
        self.folder: Path = place.folder
        # a home moved, a dashboard new here or taken from a home written before the split: said before anything
        self.notes = [note for note in (adopt_legacy_state(settings), *place.open()) if note]
        self.settings = settings.with_memory(place.path)  # every store of the run: this dashboard's database
        self.notes += [note for note in (forgotten_holds(self.settings, dashboard),) if note]
        self.journal = JobJournal(place.path)
        self.rollback_reads = RollbackReads(place.path, dashboard)
        # the sites MainWP is asked tonight which versions WordPress rolled back (None: every site, no night of
        # this dashboard recorded yet)
        self.rollback_sites: frozenset[int] | None = self.rollback_reads.sites()

    def visual_baselines(self) -> VisualBaselines:
        """A healthy night's last shots and learned noise masks of the dashboard's pages."""
        return VisualBaselines(self.folder, self.dashboard)
