"""A night that did nothing it was there to do is not a green night: it synced none of the sites it had to sync,
or it had updates to apply and attempted none of them (each skipped or unknown: a deadline passed, the dashboard
stopped answering). Such a night ends Failed with its own exit code, and alerts, so that nobody reads its quiet
report as "all is well"."""

from __future__ import annotations

from collections import Counter

from fleet.model.keys import item_key
from fleet.model.summary import Outcome, Summary
from fleet.model.vocabulary import count
from fleet.rules.breakage import NightFailure
from fleet.rules.plan import Plan

NOT_DONE = frozenset({Outcome.skipped, Outcome.unknown})


class NightDidNothing(NightFailure):  # noqa: N818 - it reads as the verdict: "the night did nothing"
    """The night ended without syncing or updating anything it had to; its summary and report say why."""


def nothing_done(summary: Summary, plan: Plan, sync_asked: int, synced: int) -> str | None:
    """Why the night did nothing (None when it did something, had nothing to do, or was a dry run)."""
    if summary.dry_run:
        return None
    if sync_asked and not synced:
        reasons = Counter(site.status for site in summary.sites if site.status != "online")
        why = f" ({', '.join(f'{n} {status}' for status, n in reasons.most_common())})" if reasons else ""
        return f"it synced none of the {count(sync_asked, 'site')} it had to sync{why}"
    to_apply = {item.key for item in plan.to_apply()}
    ended = [item for item in summary.items
             if item_key(item) in to_apply and item.applied_by_run is None]
    if ended and all(item.outcome in NOT_DONE for item in ended):
        reasons = Counter((item.reason or item.outcome.value).split(":", 1)[0] for item in ended)
        top, n = reasons.most_common(1)[0]
        return f"it attempted none of its {count(len(ended), 'update')} ({n} of them: {top})"
    return None
