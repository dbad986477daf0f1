"""What the reports say about known vulnerabilities: the fixes installed, those held while the site stays vulnerable
(at the head of the operator's report), what has no fix yet, and the feed's age and attribution."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime

from fleet.model.summary import Outcome, Summary
from fleet.model.vulnerability import Exposure, ItemSecurity, Security, Vulnerability
from reporting.rows import ItemRow

MAX_ROWS = 20
NO_FIX_PLAN = ("we watch for a fix and install it the night it is offered; until then the item stays as it is")


@dataclass
class SecurityRow:
    site: str
    item: str
    type: str
    version: str  # the change ("1.0 → 1.1"), or the installed version
    vulnerabilities: str  # "CVE-2026-1234 9.8 Critical; ..."
    state: str = ""  # what became of the fix ("installed", "held: ..."), empty for what has no fix


@dataclass
class SecuritySection:
    sentence: str
    feed: str
    attribution: str
    held: list[SecurityRow] = field(default_factory=list)  # fixes offered, not installed: vulnerable meanwhile
    fixed: list[SecurityRow] = field(default_factory=list)
    open: list[SecurityRow] = field(default_factory=list)  # no fix offered (pending or installed)
    more: int = 0  # rows left out of the lists (all are in summary.json)
    no_fix_plan: str = NO_FIX_PLAN
    measures: str = ""  # the operator's: exposure across nights, time from a fix offered to patched


def security_rows(items: list[ItemRow]) -> list[ItemRow]:
    """The items the section lists or counts: all but the routine ones and those never classed."""
    return [item for item in items if item.security is not None and item.security.security is not Security.routine]


def _labels(vulnerabilities: tuple[Vulnerability, ...] | list[Vulnerability]) -> str:
    return "; ".join(v.label for v in vulnerabilities)


def _feed_line(summary: Summary, client: bool) -> str:
    feed = summary.vulnerability_feed
    if feed is None or feed.fetched_at is None:
        return "Known vulnerabilities were not checked tonight" + (f": {feed.problem}" if feed and feed.problem
                                                                    and not client else ".")
    fetched = datetime.fromisoformat(feed.fetched_at)
    hours = (summary.finished_at - fetched).total_seconds() / 3600
    age = f"{hours:.0f} h old" if hours >= 1 else "fresh"
    line = f"Checked against the vulnerability feed of {fetched:%d %b %Y %H:%M} UTC ({age})"
    if feed.problem and not client:
        line += f"; tonight's refresh failed, the last good copy was used: {feed.problem}"
    return line + "."


def fix_wait_words(waited: list[float]) -> str:
    """" within 3 hours of being available": the longest wait of the fixes installed, each from its fix first
    offered to the site (said only when every installed fix was measured)."""
    if not waited:
        return ""
    hours = math.ceil(max(waited) - 1e-9)
    if hours <= 1:
        return " within an hour of being available"
    return f" within {hours} hours of being available" if hours <= 48 else \
        f" within {math.ceil(hours / 24)} days of being available"


def _row(item: ItemRow, security: ItemSecurity, vulnerabilities: tuple[Vulnerability, ...], state: str) -> SecurityRow:
    change = f"{item.from_version or '?'} → {item.to_version or '?'}"
    return SecurityRow(item.site_name, item.name or item.slug, item.type.value, change, _labels(vulnerabilities),
                       state)


def _state(item: ItemRow, dry_run: bool) -> str:
    if item.outcome is Outcome.updated:
        return "would be installed" if dry_run else "installed"
    return f"{item.outcome.value}: {item.reason}" if item.reason else item.outcome.value


def security_section(summary: Summary, items: list[ItemRow], exposure: list[Exposure], *,
                     client: str | None = None, tidy: Callable[[object, int], str] = lambda v, _: str(v)
                     ) -> SecuritySection | None:
    """The section of one report (a client's: its sites only, in plain words); None when there is nothing to
    say and the feed was never set up. `tidy` makes each untrusted value one bounded line (the report's `clean`)."""
    is_client = client is not None
    held, fixed, still = [], [], []
    waited: list[float] = []  # hours each installed fix's site waited for it, where the night measured it
    unchecked = 0
    for item in items:
        security = item.security
        if security is None or (is_client and item.client != client):
            continue
        if security.security is Security.fixes:
            row = _row(item, security, security.fixes, _state(item, summary.dry_run))
            (fixed if item.outcome is Outcome.updated else held).append(row)
            if item.outcome is Outcome.updated and item.fix_waited_hours is not None:
                waited.append(item.fix_waited_hours)
        elif security.security is Security.no_fix:
            still.append(_row(item, security, security.open, ""))
        elif security.security is Security.unchecked:
            unchecked += 1
    for exposed in exposure:
        if not is_client or exposed.client == client:
            still.append(SecurityRow(exposed.site_name, exposed.name or exposed.slug, exposed.type, exposed.version,
                                     _labels(exposed.vulnerabilities)))
    feed = summary.vulnerability_feed
    if feed is None and not (held or fixed or still):
        return None
    fixes_word = "would be installed" if summary.dry_run else "installed"
    parts = [f"{len(fixed)} security fix{'es' if len(fixed) != 1 else ''} {fixes_word}"
             + ("" if summary.dry_run or len(waited) != len(fixed) else fix_wait_words(waited))]
    if held:
        parts.append(f"{len(held)} held while vulnerable" if not is_client
                     else f"{len(held)} security fix{'es' if len(held) != 1 else ''} not installed yet")
    if still:
        parts.append(f"{len(still)} item{'s' if len(still) != 1 else ''} with a known vulnerability and no fix yet")
    if unchecked and not is_client:
        parts.append(f"{unchecked} item{'s' if unchecked != 1 else ''} unchecked (never read as clean)")
    rows = held + fixed + still

    def tidied(kept: list[SecurityRow]) -> list[SecurityRow]:
        return [replace(row, **{f.name: tidy(getattr(row, f.name), 300) for f in fields(row)}) for row in kept]

    keep = (tidied(held[:MAX_ROWS]), tidied(fixed[:MAX_ROWS]), tidied(still[:MAX_ROWS]))
    return SecuritySection(
        sentence="; ".join(parts) + ".", feed=_feed_line(summary, is_client),
        attribution=feed.attribution if feed is not None else "",
        held=keep[0], fixed=keep[1], open=keep[2], more=len(rows) - sum(map(len, keep)),
        measures=f"Across nights: {summary.exposure_stats.sentence}." if summary.exposure_stats and not is_client
        else "")
