"""The night's vulnerable items sorted once, for every view (the reports' vulnerability section, `fleet
vulnerabilities show`): fixed, not installed (a fix offered and not installed: still vulnerable), and open (no fix
offered yet), so that no view can call a site safe that another calls vulnerable.

An item whose update fixes one vulnerability and leaves another open is in two lists: its fix (fixed or not
installed) and its open vulnerabilities (open), since the site stays vulnerable to those whatever became of the
update. Everything here is the summary's own, untrusted: each view makes it safe for its format."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from fleet.model.summary import Item, Outcome, Summary
from fleet.model.vocabulary import operator_voice, said_outcome, with_reason
from fleet.model.vulnerability import Vulnerability, VulnerabilityClass, published_at
from reporting.rows import ItemRow


@dataclass(frozen=True, slots=True)
class VulnerableItem:
    """One item of one site with known vulnerabilities, with what every view says of it."""

    site_name: str
    site_url: str
    client: str | None
    type: str  # plugin, theme, core
    name: str
    version: str  # the update ("1.0 → 1.1", "?" for a version not known), or the installed version (none pending)
    vulnerabilities: tuple[Vulnerability, ...]
    outcome: Outcome | None  # what became of its update (a dry run's would-apply: updated); None: none pending
    word: str = ""  # the fix's fate: "installed", "would be installed", "held", ...; empty when none is offered
    reason: str | None = None  # why a fix was not installed
    public_hours: float | None = None  # how long the oldest advisory has been public (None: no date given)
    installed: bool = False  # the fix went in tonight: `public_hours` ran from the advisory to its install

    @property
    def fate(self) -> str:
        """`held: the agency checks it first`, `installed`; empty when no fix is offered."""
        return with_reason(self.word, self.reason)

    @property
    def labels(self) -> str:
        """`CVE-2026-1234 9.8 Critical; ...`"""
        return "; ".join(v.label for v in self.vulnerabilities)


@dataclass(frozen=True, slots=True)
class VulnerableItems:
    """The three lists, each in the summary's order (its items, then its vulnerable installs: `exposure`), and the
    items never checked."""

    fixed: list[VulnerableItem]
    not_installed: list[VulnerableItem]  # a fix offered and not installed: the site still vulnerable
    open: list[VulnerableItem]  # no fix offered: pending, installed, or left open by an item's fix
    unchecked: int  # items the feed could not be matched against: never read as clean


def public_hours(vulnerabilities: tuple[Vulnerability, ...] | list[Vulnerability], now: datetime) -> float | None:
    """How long the oldest of these advisories has been public at `now` (None: no publication date given)."""
    moments = [moment for v in vulnerabilities if (moment := published_at(v.published)) is not None]
    return max(0.0, (now - min(moments)).total_seconds() / 3600) if moments else None


def vulnerable_items(summary: Summary, items: Iterable[ItemRow | Item], *, client: str | None = None
                     ) -> VulnerableItems:
    """Sort the summary's vulnerable items (`items`: a report holds them apart from its summary) and its
    vulnerable installs (`exposure`); `client` keeps only that client's (None: every site)."""
    now, dry_run = summary.finished_at, summary.dry_run
    fixed: list[VulnerableItem] = []
    not_installed: list[VulnerableItem] = []
    still: list[VulnerableItem] = []
    unchecked = 0
    for item in items:
        found = item.security
        if found is None or (client is not None and item.client != client):
            continue
        if found.security is VulnerabilityClass.unchecked:
            unchecked += 1
        if found.security not in (VulnerabilityClass.fixes, VulnerabilityClass.no_fix):
            continue
        outcome = said_outcome(item.outcome, item.rule)  # a dry run's fix it would apply: would be installed
        if found.security is VulnerabilityClass.fixes and outcome is Outcome.updated:
            fixed.append(_entry(item, outcome, found.fixes, now, word="would be installed" if dry_run
                                else "installed", installed=not dry_run))
        elif found.security is VulnerabilityClass.fixes:
            not_installed.append(_entry(item, outcome, found.fixes, now,
                                        word=operator_voice().term(outcome).word, reason=item.reason))
        if found.open:
            still.append(_entry(item, outcome, found.open, now))
    for vulnerable in summary.exposure:
        if client is None or vulnerable.client == client:
            vulnerabilities = tuple(vulnerable.vulnerabilities)
            still.append(VulnerableItem(vulnerable.site_name, vulnerable.site_url, vulnerable.client, vulnerable.type,
                                        vulnerable.name or vulnerable.slug, vulnerable.version, vulnerabilities, None,
                                        public_hours=public_hours(vulnerabilities, now)))
    return VulnerableItems(fixed, not_installed, still, unchecked)


def _entry(item: ItemRow | Item, outcome: Outcome, vulnerabilities: tuple[Vulnerability, ...], now: datetime, *,
           word: str = "", reason: str | None = None, installed: bool = False) -> VulnerableItem:
    """An item's entry in one list: its fix and its open vulnerabilities are two entries of one item."""
    return VulnerableItem(item.site_name, item.site_url, item.client, item.type.value, item.name or item.slug,
                          f"{item.from_version or '?'} → {item.to_version or '?'}", vulnerabilities, outcome, word,
                          reason, public_hours(vulnerabilities, now), installed)
