"""What the reports say about known vulnerabilities: the fixes installed, those not installed while the site stays
vulnerable (each under its own outcome's word: held, skipped, failed, ...), what has no fix yet, how long each has
been public (from its advisory's publication, as users measure exposure), the measures across nights, and the
feed's age and attribution. A client reads a plain sentence per figure; the vulnerabilities' ids are in a details
block of their own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime

from fleet.model.summary import Summary
from fleet.model.vocabulary import LIST_SEPARATOR, count, operator_voice
from fleet.model.vulnerability import Security
from reporting.rows import ItemRow
from reporting.vulnerable_items import VulnerableItem, vulnerable_items

MAX_ROWS = 20  # rows of a list in the text and Markdown reports (the HTML has every one)
SHOWN = 10  # rows of a list in the HTML in full; the rest folded, one short row each
NO_FIX_PLAN = "we watch for a fix and install it the night it is offered; until then the item stays as it is"


@dataclass
class SecurityRow:
    site: str
    item: str
    type: str
    version: str  # the change ("1.0 → 1.1"), or the installed version
    vulnerabilities: str  # "CVE-2026-1234 9.8 Critical; ..."
    state: str = ""  # what became of the fix ("installed", "skipped: site is suspended"), empty for what has no fix
    age: str = ""  # "installed 9 h after its advisory", "public for 12 days"


@dataclass
class SecuritySection:
    sentence: str  # every count in one sentence (the operator's; a client's is `plain`)
    feed: str
    attribution: str
    not_installed: list[SecurityRow] = field(default_factory=list)  # fixes offered, not installed: still vulnerable
    fixed: list[SecurityRow] = field(default_factory=list)
    open: list[SecurityRow] = field(default_factory=list)  # no fix offered: pending, installed, left by a fix
    alarm: str = ""  # the operator's head line when fixes were not installed: their count by word
    no_fix_plan: str = NO_FIX_PLAN
    measures: str = ""  # the operator's: exposure across nights
    plain: list[str] = field(default_factory=list)  # a client's: a plain sentence per figure
    shown: int = SHOWN

    @property
    def rows(self) -> int:
        return len(self.not_installed) + len(self.fixed) + len(self.open)


def security_rows(items: list[ItemRow]) -> list[ItemRow]:
    """The items the section lists or counts: all but the routine ones and those never classed."""
    return [item for item in items if item.security is not None and item.security.security is not Security.routine]


def feed_line(summary: Summary, client: bool) -> str:
    """Which copy of the feed the night matched against and how old it is, one whole sentence: a refresh that
    failed never sits beside "fresh" (the copy used is then said by its age)."""
    feed = summary.vulnerability_feed
    if feed is None or feed.fetched_at is None:
        why = f": {feed.problem.rstrip('.')}" if feed and feed.problem and not client else ""
        return f"Known vulnerabilities were not checked tonight{why}."
    fetched = datetime.fromisoformat(feed.fetched_at)
    hours = (summary.finished_at - fetched).total_seconds() / 3600
    source = "" if client else f" ({feed.source})"  # the copy's own source: a failed read of another is the problem
    if feed.problem and not client:
        age = f"{hours:.0f} h old" if hours >= 1 else "less than an hour old"
        return (f"Tonight's refresh of the vulnerability feed failed ({feed.problem.rstrip('.')}): the last good copy, "
                f"of {fetched:%d %b %Y %H:%M} UTC ({age}){source}, was used.")
    age = f"{hours:.0f} h old" if hours >= 1 else "fresh"
    return f"Checked against the vulnerability feed of {fetched:%d %b %Y %H:%M} UTC ({age}){source}."


def span(hours: float) -> str:
    """A time in the unit a person reads it in: `40 min`, `9 h`, `3 days`."""
    if hours < 1:
        return f"{max(1, round(hours * 60))} min"
    if hours < 48:
        return f"{round(hours)} h"
    return f"{round(hours / 24)} days"


def _row(entry: VulnerableItem) -> SecurityRow:
    """A report's row of an entry: a fix installed is aged to its install, anything else to tonight."""
    if entry.public_hours is None:
        age = ""
    elif entry.installed:
        age = f"installed {span(entry.public_hours)} after its advisory"
    else:
        age = f"public for {span(entry.public_hours)}"
    return SecurityRow(entry.site_name, entry.name, entry.type, entry.version, entry.labels, entry.fate, age)


def security_section(summary: Summary, items: list[ItemRow], *, client: str | None = None,
                     tidy: Callable[[object, int], str] = lambda v, _: str(v)) -> SecuritySection | None:
    """The section of one report (a client's: its sites only, in plain words), from the one sorting of every view
    (`vulnerable_items`); None when there is nothing to say and the feed was never set up. `tidy` makes each
    untrusted value one bounded line (the report's `clean`)."""
    is_client = client is not None
    found = vulnerable_items(summary, items, client=client)
    fixed, not_installed, still = found.fixed, found.not_installed, found.open
    feed = summary.vulnerability_feed
    if feed is None and not (not_installed or fixed or still):
        return None
    words = Counter(entry.word for entry in not_installed)
    by_word = LIST_SEPARATOR.join(f"{word} {n}" for word, n in sorted(
        words.items(), key=lambda pair: [term.word for term in operator_voice().ordered()].index(pair[0])))
    fixes_word = "would be installed" if summary.dry_run else "installed"
    parts = [f"{count(len(fixed), 'security fix').replace('fixs', 'fixes')} {fixes_word}"]
    if not_installed:
        parts.append(f"{len(not_installed)} not installed while vulnerable ({by_word})")
    if still:
        parts.append(f"{count(len(still), 'item')} with a known vulnerability and no fix yet")
    if found.unchecked:
        parts.append(f"{count(found.unchecked, 'item')} unchecked (never read as clean)")

    def tidied(kept: list[VulnerableItem]) -> list[SecurityRow]:
        return [replace(row, **{f.name: tidy(getattr(row, f.name), 300) for f in fields(row)})
                for row in map(_row, kept)]

    since_advisory = [entry.public_hours for entry in fixed if entry.installed and entry.public_hours is not None]
    return SecuritySection(
        sentence="; ".join(parts) + ".", feed=feed_line(summary, is_client),
        attribution=feed.attribution if feed is not None else "",
        not_installed=tidied(not_installed), fixed=tidied(fixed), open=tidied(still),
        alarm="" if is_client or not not_installed else
        f"Security fixes not installed, the sites still vulnerable: {len(not_installed)} ({by_word})",
        measures=f"Across nights: {summary.exposure_stats.sentence}." if summary.exposure_stats and not is_client
        else "",
        plain=plain_sentences(len(fixed), since_advisory, len(not_installed), len(still), summary.dry_run)
        if is_client and feed is not None and feed.fetched_at else [])  # not checked: the feed's line says it


def plain_sentences(fixed: int, since_advisory: list[float], not_installed: int, no_fix: int, dry_run: bool
                    ) -> list[str]:
    """A client's figures, a plain sentence each: what was installed and how soon after it was made public, what is
    not installed yet, and what has no fix (and what we do about it)."""
    said = []
    if fixed or not (not_installed or no_fix):
        soon = (f", on average {span(sum(since_advisory) / len(since_advisory))} after "
                f"{'it was' if fixed == 1 else 'they were'} published"
                if since_advisory and len(since_advisory) == fixed and not dry_run else "")
        verb = "would be installed" if dry_run else "installed"
        said.append(f"{count(fixed, 'security fix').replace('fixs', 'fixes')} {verb}{soon}.")
    if not_installed:
        said.append(f"{count(not_installed, 'security fix').replace('fixs', 'fixes')} not installed yet: the "
                    "updates below say why and what happens next.")
    if no_fix:
        has = "has" if no_fix == 1 else "have"
        said.append(f"{count(no_fix, 'known security issue')} {has} no fix yet: we watch "
                    f"{'it' if no_fix == 1 else 'them'} and install the fix the night it is offered.")
    return said
