"""The words every count is said in, written once: the console's closing line, the log lines, the mail subjects
and the three report formats, the operator's and the clients'.

One outcome has one word, so the same number carries the same word everywhere: "would update 146" in a dry
run's plan line, its console line, its subject and its reports alike. A client reads fewer, plainer words
(several outcomes share one: "not installed yet" is failed, unchanged or no answer), each with what happens
next; the operator, every log line and the console read one word per outcome. Counts say what they count
(`count(40, "site")`), and a list of counts is "word N; word N" (a word may hold a comma).

A new outcome (such as "updated, not verified") gets its `Term` in `OPERATOR_TERMS` and `CLIENT_TERMS`, its place
in `OUTCOME_ORDER` and `CLIENT_ORDER`, and its colour in `reporting.model.TERM_COLORS`;
`tests/pipeline/test_vocabulary.py` fails until it has all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from fleet.model.summary import DRY_RUN_RULE, LastSync, Outcome, Summary

MOMENT = "%d %b %Y %H:%M UTC"  # how every report and line writes a moment
LIST_SEPARATOR = "; "  # between the counts of a list: a word may hold a comma


def count(number: int, unit: str, plural: str | None = None) -> str:
    """`1 site`, `2 sites`: a count with its unit, for one or many (`plural` where an `s` is not it)."""
    return f"{number} {unit}" if number == 1 else f"{number} {plural or unit + 's'}"


@dataclass(frozen=True)
class Term:
    """The word for one outcome (or, for a client, several), as counted and as headed."""

    key: str  # stable, for markup and colours: the outcome's value, or a client group's name
    word: str  # lower case, as counted: "failed 8"
    explanation: str  # one line under its section
    until: str = ""  # what an item's date means under it: "hold ends", "eligible"

    @property
    def title(self) -> str:
        """The word as a heading or a table row: "No answer"."""
        return self.word[:1].upper() + self.word[1:]

    def said(self, number: int) -> str:
        """The word with its number: `failed 8`."""
        return f"{self.word} {number}"


UPDATED = Term("updated", "updated", "Installed tonight: each with its version change.")
WOULD_UPDATE = Term("would_update", "would update", "What a run now would install: each with its version change.")
NOT_UPDATED = Term("not_updated", "not updated", "Everything found that was not updated tonight, and why.")
WOULD_NOT_UPDATE = Term("not_updated", "would not update", "Everything found that a run now would not update, "
                        "and why.")
TO_UPDATE = Term("to_update", "to update", "Planned to be installed tonight.")  # the plan's word, before the night
AWAITING_APPROVAL = Term("awaiting_approval", "awaiting approval", "Applied only once a person approves it.")

OPERATOR_TERMS: Mapping[Outcome, Term] = {
    Outcome.updated: UPDATED,
    Outcome.failed: Term("failed", "failed", "The update was attempted and the site reported an error."),
    Outcome.not_switched_on: Term("not_switched_on", "not switched on", "Installed switched off on the way back to "
                                  "a site a release broke, and switching it on failed: it never ran, stays "
                                  "deactivated and is held."),
    Outcome.unknown: Term("unknown", "no answer", "The update was sent but no answer came back; the version is not "
                          "known to have moved."),
    Outcome.unchanged: Term("unchanged", "unchanged", "No error was reported, but the installed version did not "
                            "change."),
    Outcome.held: Term("held", "held", "Held back on purpose: by the policy, by the nights after a bad version, or "
                       "at the approval gate.", until="hold ends"),
    Outcome.delayed: Term("delayed", "delayed", "The new version is too recent; it becomes eligible on the date "
                          "shown.", until="eligible"),
    Outcome.ignored: Term("ignored", "ignored", "On the dashboard's ignore list."),
    Outcome.excluded: Term("excluded", "excluded", "Left out by the maintenance policy."),
    Outcome.skipped: Term("skipped", "skipped", "The site could not be worked on (offline, suspended, disconnected "
                          "or too old)."),
    Outcome.deferred: Term("deferred", "deferred", "Outside the site's maintenance window or in a blackout: not "
                           "touched, due when it next opens."),
}

NOT_INSTALLED = Term("not_installed", "not installed yet", "Tried tonight and not installed; each says what happens "
                     "next.")
LEFT_OUT = Term("left_out", "left out on purpose", "Kept back by agreement or by our maintenance policy.")
CLIENT_TERMS: Mapping[Outcome, Term] = {
    Outcome.updated: UPDATED,
    Outcome.failed: NOT_INSTALLED,
    Outcome.unknown: NOT_INSTALLED,
    Outcome.unchanged: NOT_INSTALLED,
    Outcome.not_switched_on: NOT_INSTALLED,
    Outcome.held: Term("held", "held back", "Kept back on purpose; each says why.", until="held until"),
    Outcome.delayed: Term("waiting", "waiting a few days", "We install a new release a few days after it comes "
                          "out, once it has proved itself; each says from when.", until="due from"),
    Outcome.skipped: Term("unavailable", "site not available", "The website could not be worked on tonight; each "
                          "says what happens next."),
    Outcome.deferred: Term("window", "outside the maintenance times", "Not touched tonight: outside the times "
                           "agreed for maintenance; each is done when those times next come round."),
    Outcome.ignored: LEFT_OUT,
    Outcome.excluded: LEFT_OUT,
}

# Attention first: what went wrong, then what was decided not to do.
OUTCOME_ORDER = (
    Outcome.updated, Outcome.failed, Outcome.not_switched_on, Outcome.unknown, Outcome.unchanged, Outcome.held,
    Outcome.delayed, Outcome.ignored, Outcome.excluded, Outcome.skipped, Outcome.deferred,
)  # fmt: skip
# A client reads what was left out on purpose last, in one sentence.
CLIENT_ORDER = (
    Outcome.updated, Outcome.failed, Outcome.not_switched_on, Outcome.unknown, Outcome.unchanged, Outcome.held,
    Outcome.delayed, Outcome.skipped, Outcome.deferred, Outcome.ignored, Outcome.excluded,
)  # fmt: skip
ATTENTION = (Outcome.failed, Outcome.not_switched_on, Outcome.unknown, Outcome.unchanged)  # attempted, not updated


@dataclass(frozen=True)
class Voice:
    """The words of one audience: the operator's (every log line and the console speak it too), or a client's.

    In a dry run nothing is updated, so `updated` counts what it would update, said "would update"."""

    terms: Mapping[Outcome, Term]
    dry_run: bool = False
    order: tuple[Outcome, ...] = OUTCOME_ORDER

    def term(self, outcome: Outcome) -> Term:
        if outcome is Outcome.updated and self.dry_run:
            return WOULD_UPDATE
        return self.terms[outcome]

    @property
    def done(self) -> Term:
        return self.term(Outcome.updated)

    @property
    def not_done(self) -> Term:
        return WOULD_NOT_UPDATE if self.dry_run else NOT_UPDATED

    @property
    def attention(self) -> Term:
        """The word for what was tried and not updated: the operator's "failed", a client's "not installed yet"."""
        return self.term(Outcome.failed)

    def outcomes(self, term: Term) -> tuple[Outcome, ...]:
        return tuple(outcome for outcome in self.order if self.term(outcome) == term)

    def ordered(self) -> list[Term]:
        """Every term once, in the order of the outcomes."""
        return list(dict.fromkeys(self.term(outcome) for outcome in self.order))

    def total(self, by_outcome: Mapping[Outcome, int], term: Term) -> int:
        return sum(by_outcome.get(outcome, 0) for outcome in self.outcomes(term))

    def tally(self, by_outcome: Mapping[Outcome, int]) -> list[tuple[Term, int]]:
        """The non-zero counts by term, in order."""
        return [(term, n) for term in self.ordered() if (n := self.total(by_outcome, term))]

    def listed(self, by_outcome: Mapping[Outcome, int], *, leave_out: Iterable[Term] = ()) -> str:
        """`updated 110; failed 8; ignored 44`: every non-zero count, in order."""
        skip = set(leave_out)
        return LIST_SEPARATOR.join(term.said(n) for term, n in self.tally(by_outcome) if term not in skip)


def operator_voice(dry_run: bool = False) -> Voice:
    return Voice(OPERATOR_TERMS, dry_run)


def client_voice() -> Voice:
    return Voice(CLIENT_TERMS, order=CLIENT_ORDER)  # clients are never sent a dry run


def said_outcome(outcome: Outcome, rule: str | None) -> Outcome:
    """The outcome an item is counted under: a dry run's item it would apply (`excluded`, rule `dry_run`) counts
    as `updated`, which a dry run's voice says "would update"."""
    return Outcome.updated if rule == DRY_RUN_RULE else outcome


def said_counts(summary: Summary) -> dict[Outcome, int]:
    """Items per outcome as the words count them (see `said_outcome`)."""
    counts: dict[Outcome, int] = {}
    for item in summary.items:
        outcome = said_outcome(item.outcome, item.rule)
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def with_reason(word: str, reason: str | None) -> str:
    """`held: the agency checks it first`: an outcome's word and its reason, the word said once (a hold's reason
    already starts "held: ")."""
    if not reason:
        return word
    return reason if reason.lower().startswith(f"{word}:") else f"{word}: {reason}"


def moment(value: datetime) -> str:
    return value.strftime(MOMENT)


def last_syncs(last_sync: LastSync | None) -> str:
    """`the dashboard's last syncs (between … and …)`: what a dry run plans from, since it sends no sync."""
    if last_sync is None:
        return "the dashboard's last sync (its time unknown)"
    if (last_sync.newest - last_sync.oldest).total_seconds() < 60:
        return f"the dashboard's last sync ({moment(last_sync.newest)})"
    return f"the dashboard's last syncs (between {moment(last_sync.oldest)} and {moment(last_sync.newest)})"


def planned_from(last_sync: LastSync | None) -> str:
    """What a dry run planned from, and so why the real night may differ (it syncs first)."""
    return f"planned from {last_syncs(last_sync)}, so the real night may differ"


def run_line(summary: Summary) -> str:
    """The closing line of `fleet nightly` and `fleet demo`: the run, its items and sites, every count in words."""
    voice = operator_voice(summary.dry_run)
    kind = "dry run" if summary.dry_run else "run"
    line = (f"{kind} {summary.run_id}: {count(len(summary.items), 'item')} on {count(len(summary.sites), 'site')}"
            + (f": {voice.listed(said_counts(summary))}" if summary.items else ""))
    return f"{line}; {planned_from(summary.last_sync)}" if summary.dry_run else line
