"""Step after the summary: remember the versions the night found bad, so that the next night holds them, and
release the suspects tried tonight on one site alone (their canary) that stayed healthy."""

from __future__ import annotations

from fleet.engine.outbox import Outbox
from fleet.model.events import held_events
from fleet.model.settings import PipelineSettings
from fleet.model.summary import NightHold, Summary
from fleet.rules.holds import bad_versions
from fleet.state.holds import HoldStore


async def remember_bad_versions(summary: Summary, failures_to_hold: int, settings: PipelineSettings,
                                quiet_days: int = 30, *, outbox: Outbox) -> list[NightHold]:
    """Record this night's bad versions (a dry run records none), each a `fleet.version.held` event sent through the
    `outbox`, and settle the suspects tried alone; returns every hold now active."""
    store = HoldStore(settings.state_path)
    if summary.dry_run:
        return store.active()
    found = bad_versions(summary, failures_to_hold, summary.started_at.date())
    store.remember(found, quiet_days)
    store.settle_canaries(summary)
    outbox.emit(held_events(found, summary.dashboard or "", summary.run_id))
    return store.active()
