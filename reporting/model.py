"""The one data object every report format is rendered from (HTML, text, Markdown)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Generic, TypeVar
from urllib.parse import quote

from fleet.model.summary import Band, Outcome, UpdateType
from fleet.model.vocabulary import (
    ATTENTION,
    LIST_SEPARATOR,
    NOT_UPDATED,
    UPDATED,
    WOULD_UPDATE,
    Term,
    Voice,
    count,
    moment,
)
from reporting.vulnerability_section import VulnerabilitySection

SITE_STATUS_TITLES = {
    "online": "online",
    "offline": "offline",
    "suspended": "suspended",
    "disconnected": "disconnected from the dashboard",
    "child_too_old": "dashboard plugin on the site too old",
}

# One palette for the charts and the HTML badges, by the key of each word (`fleet.model.vocabulary`): each dark
# enough for a badge's white text to read at 4.5:1 or more (WCAG 2 AA; tests/reporting/test_report_accessibility.py)
TERM_COLORS = {
    "updated": "#18794e",
    "would_update": "#18794e",
    "failed": "#b42318",
    "not_switched_on": "#9b1c1c",
    "unknown": "#b54708",
    "unchanged": "#8a6100",
    "held": "#4557b8",
    "delayed": "#1d6fa5",
    "ignored": "#5f6b7a",
    "excluded": "#3e4c59",
    "skipped": "#6f5f8f",
    "deferred": "#486581",
    "not_installed": "#b54708",
    "waiting": "#1d6fa5",
    "unavailable": "#6f5f8f",
    "window": "#486581",
    "left_out": "#5f6b7a",
}
TYPE_NAMES = {
    UpdateType.translation: "translation",
    UpdateType.plugin: "plugin",
    UpdateType.theme: "theme",
    UpdateType.core: "WordPress core",
}
TYPE_TITLES = {
    UpdateType.translation: "Translations",
    UpdateType.plugin: "Plugins",
    UpdateType.theme: "Themes",
    UpdateType.core: "WordPress core",
}


T = TypeVar("T")


@dataclass
class Rows(Generic[T]):
    """A list a report shows whole, never cut: its first rows in full (all the text and Markdown reports show, and
    they say where the rest is), the rest `folded`: in the HTML, one short row each inside a <details> whose summary
    says how many. A fleet of 10,000 sites keeps every row in its e-mail (docs/reports.md, "Long lists")."""

    shown: list[T] = field(default_factory=list)
    folded: list[T] = field(default_factory=list)

    @classmethod
    def split(cls, rows: Iterable[T], limit: int) -> Rows[T]:
        rows = list(rows)
        return cls(rows[:limit], rows[limit:])

    @property
    def more(self) -> int:
        """The rows past the first, folded in the HTML (and only counted in the text and Markdown)."""
        return len(self.folded)

    def __len__(self) -> int:
        return len(self.shown) + len(self.folded)

    def __iter__(self) -> Iterator[T]:
        yield from self.shown
        yield from self.folded


def image_subtype(image: bytes) -> str:
    """`jpeg` for the screenshots' pictures, `png` for the charts: the one place that tells them apart."""
    return "jpeg" if image.startswith(b"\xff\xd8") else "png"


@dataclass(frozen=True)
class Tile:
    """One number at the top of a report, with its word (the word the headline and the sections use)."""

    metric: str  # for markup
    number: int
    word: str
    tone: str = ""  # "good", "bad" or ""
    unit: str = ""  # what the number counts ("item"), said in its label; none when the word is the unit ("sites")

    @property
    def label(self) -> str:
        """`items updated`, `1 item failed`'s label `item failed`: the number never stands without its unit."""
        if not self.unit:
            return self.word
        return f"{self.unit if self.number == 1 else self.unit + 's'} {self.word}"


@dataclass
class Headline:
    """The numbers at the top of a report and their sentence, in the report's words (`voice`): the tiles, the
    headline, "At a glance" and the sections say the same number with the same word."""

    voice: Voice
    sites: int
    sites_updated: int  # sites with an item updated (a dry run: that it would update)
    items: int
    by_outcome: dict[Outcome, int]  # a dry run's items it would apply counted as `updated`
    checked: int
    healthy: int
    open_incidents: int
    broken: int = 0  # sites the night broke
    unusable: int = 0  # sites that could not be worked on (offline, suspended, disconnected, too old)
    client: bool = False
    not_verified: int = 0  # of the updated items, those the dashboard's answer alone says were updated

    @property
    def done(self) -> int:
        """What the night applied, or in a dry run what it would apply."""
        return self.voice.total(self.by_outcome, self.voice.done)

    @property
    def not_updated(self) -> int:
        """Everything found and not updated (in a dry run: that it would not update), the failed included."""
        return self.items - self.done

    @property
    def attention(self) -> int:
        """What was tried and not updated, in the voice's word: the operator's failed, a client's not installed."""
        return self.voice.total(self.by_outcome, self.voice.attention)

    @property
    def glance(self) -> list[tuple[Term, int]]:
        """Every non-zero count by word: "At a glance"."""
        return self.voice.tally(self.by_outcome)

    @property
    def tiles(self) -> list[Tile]:
        tiles = [Tile("updated", self.done, self.voice.done.word, "good" if self.done else "", self.unit),  # a zero
                 # is never green
                 Tile("not_updated", self.not_updated, self.voice.not_done.word, unit=self.unit)]
        if not self.voice.dry_run:  # a dry run tries nothing
            alarming = self.attention and not self.client  # a client reads what happens next, not a red number
            tiles.append(Tile("failed", self.attention, self.voice.attention.word, "bad" if alarming else "",
                              self.unit))
        return [*tiles, Tile("sites", self.sites, "site" if self.sites == 1 else "sites")]

    unit = "item"  # what the tiles' and the subject's counts count (a client's sentence says "of N updates")

    @property
    def subject_counts(self) -> str:
        """What the subject says: the updated, and what was tried and not updated."""
        attention = {self.voice.term(outcome) for outcome in ATTENTION}
        said = [(self.voice.done, self.done)] + [(term, n) for term, n in self.glance if term in attention]
        return LIST_SEPARATOR.join(f"{term.word} {count(n, self.unit)}" for term, n in said)

    @property
    def health_parts(self) -> list[tuple[str, str]]:
        """The checks' sentence in parts, each with its tone ("good", "bad" or ""): good news is never coloured as
        an alarm because another part is one."""
        parts = []
        if self.checked:
            sick = self.checked - self.healthy
            verb = "needs" if sick == 1 else "need"
            if not sick:
                parts.append(("The checked site is healthy" if self.checked == 1 else
                              f"All {self.checked} checked sites are healthy", "good"))
            else:
                parts.append((f"{sick} of {count(self.checked, 'checked site')} {verb} attention", "bad"))
        if self.unusable:
            parts.append((f"{count(self.unusable, 'site')} could not be worked on" + (
                " tonight" if self.client else " (offline, suspended, disconnected or too old)"),
                "" if self.client else "bad"))
        return parts

    @property
    def health(self) -> str:
        """The checks in one sentence, never "all healthy" without the sites that could not even be checked."""
        parts = [text for text, _ in self.health_parts]
        return "; ".join(parts) + "." if parts else ""

    @property
    def healthy_everywhere(self) -> bool:
        return self.healthy == self.checked and not self.unusable

    @property
    def alarm(self) -> str:
        """The first thing to read when the night broke sites (empty otherwise)."""
        if not self.broken:
            return ""
        if self.client:
            return f"Tonight's updates broke {count(self.broken, 'website')} of yours: see below."
        return f"The night broke {count(self.broken, 'site')}: see the suspects below."

    @property
    def sentence(self) -> str:
        """`Updated 110 of 185 items on 32 sites; not updated 75 (see why below): failed 8; ignored 44; ...`."""
        if self.items == 0:
            if self.sites == 1:
                return "The site was up to date: there was nothing to update."
            return f"All {self.sites} sites were up to date: there was nothing to update."
        done = self.voice.done
        said = f"{done.title} {self.done} of {count(self.items, 'update' if self.client else self.unit)}"
        if self.sites_updated:
            said += f" on {count(self.sites_updated, 'site')}"
        if self.not_verified:
            said += f" ({self.not_verified} of them updated, not verified: see below)"
        if self.not_updated:
            said += (f"; {self.voice.not_done.said(self.not_updated)} (see why below): "
                     f"{self.voice.listed(self.by_outcome, leave_out=[done])}")
        return said + "."


def version_change(from_version: str, to_version: str) -> str:
    """`1.2 → 1.3`, or nothing when the new version is not known (translations)."""
    return "" if to_version == "—" else f"{from_version} → {to_version}"


CLIENT_NOT_VERIFIED = ("installed, as the update answered, but not verified: the website stopped answering "
                       "our checks right after; we are looking into it")


@dataclass(slots=True)  # tens of thousands on a large fleet
class UpdatedItem:
    type: UpdateType
    name: str
    from_version: str
    to_version: str
    suspect: bool = False  # applied to a site the night broke
    not_verified: str = ""  # updated by the dashboard's answer alone: why it could not be verified

    @property
    def change(self) -> str:
        return version_change(self.from_version, self.to_version)


@dataclass(slots=True)
class UpdatedSite:
    site_name: str
    site_url: str
    items: list[UpdatedItem]


SITES_NAMED = 3  # sites named in a grouped row before "and N more"


@dataclass
class NotDoneRow:
    """One item with one outcome and one reason, and every site it stands on."""

    sites: list[str]
    type: UpdateType
    name: str
    from_version: str
    to_version: str
    why: str
    until: date | None

    @property
    def change(self) -> str:
        return version_change(self.from_version, self.to_version)

    @property
    def named(self) -> Rows[str]:
        """The sites a row names, the rest folded in the HTML."""
        return Rows.split(self.sites, SITES_NAMED)

    @property
    def site_names(self) -> str:
        """The sites compactly: `a`, `a and b`, or `a, b, c and 4 more sites`."""
        named = self.named
        if named.more:
            return f"{', '.join(named.shown)} and {count(named.more, 'more site')}"
        return named.shown[0] if len(named) == 1 else f"{', '.join(named.shown[:-1])} and {named.shown[-1]}"


@dataclass
class NotDoneGroup:
    """The items of one word (an outcome; for a client, maybe several), with why and what happens next: every
    grouped row, the first in full."""

    term: Term
    total: int  # items
    rows: Rows[NotDoneRow]


@dataclass
class PluginFailure:
    name: str
    version: str
    attempted: int
    failed: int

    @property
    def rate(self) -> float:
        return self.failed / self.attempted if self.attempted else 0.0


@dataclass
class SiteProblem:
    site_name: str
    site_url: str
    status: str
    http_code: int | None
    response_ms: float | None
    issue: str
    open_incidents: int


@dataclass
class Checks:
    checked: int
    healthy: int
    open_incidents: int
    problems: Rows[SiteProblem]  # every site that needs attention


class OutcomeTotals:
    """Totals of a row that counts items by outcome."""

    by_outcome: dict[Outcome, int]

    @property
    def total(self) -> int:
        return sum(self.by_outcome.values())

    @property
    def not_updated(self) -> int:
        """Everything not updated (in a dry run: that it would not update), the failed included."""
        return self.total - self.by_outcome[Outcome.updated]


@dataclass
class BreakdownRow(OutcomeTotals):
    """One line of a by-type or by-client table."""

    label: str
    sites: int | None
    by_outcome: dict[Outcome, int]


@dataclass
class TrendRow(OutcomeTotals):
    run_id: str
    day: date
    by_outcome: dict[Outcome, int]


@dataclass
class Alarm:
    """A site the night broke (with its suspects), or one that was already down before it."""

    site_name: str
    site_url: str
    saw: str
    dashboard_page: str | None
    suspects: list[UpdatedItem]
    held: list[str] = field(default_factory=list)  # "name version" of the suspects the nights' store now holds
    state: str = ""  # "broken, then contained: X deactivated", "down, then revived by the night: X 1.0 put back",
    # "down, unreachable by the dashboard", or ""
    next_steps: str = ""  # what the operator does now, when the night knows better than "roll back the suspects"
    site_id: int | None = None  # to find the site's look (its screenshots) beside the alarm
    look: LookView | None = None  # the operator's: the site's broken look, pictured beside the alarm

    @property
    def client_note(self) -> str:
        """What a client reads about its broken site: what was done, never how."""
        if self.state.startswith("broken, then contained"):
            return ("It was brought back at once: the update that broke it is switched off until a fixed release "
                    "is installed; we are looking into it")
        if self.state.startswith("down, then revived"):
            return ("It was brought back at once, the same night: the update that broke it was undone and the "
                    "version before it runs again")
        return "We have been alerted and are restoring the site"

    @property
    def holds_sentence(self) -> str:
        """What is held because of this site, from the store itself: never a hold that was not written."""
        if not self.held:
            return "nothing is held because of it (no suspect was shown applied)"
        return f"held fleet-wide from the next night: {', '.join(self.held)} (fleet holds list)"


@dataclass
class IncidentRow:
    """A site a night broke, as the operator's report leads with it until the incident is closed."""

    id: int
    site_name: str
    site_url: str
    state: str  # "down", "up, with X still deactivated", "closed: ..."
    age_days: int
    since: date
    opened_by: str
    cause: str  # the culprit, or the suspects, with their versions
    done: str
    next_steps: str
    last_look: str
    dashboard_page: str | None
    down: bool
    closed: bool

    @property
    def age(self) -> str:
        return "opened today" if self.age_days == 0 else f"open {count(self.age_days, 'day')}"


@dataclass
class HoldRow:
    """A version the nights hold fleet-wide."""

    item: str  # what `fleet holds release` takes
    name: str
    type: UpdateType
    version: str
    reason: str
    since: date
    age_days: int
    kind: str = "culprit"  # why it holds: culprit, suspect or failures
    ends: str = ""  # when it would end, as the night weighed it

    @property
    def age(self) -> str:
        return "today" if self.age_days == 0 else count(self.age_days, "day")


@dataclass
class DeferredGroup:
    """Sites left alone tonight for one reason (a window, a blackout), and the earliest next opening."""

    reason: str
    sites: Rows[str]  # every site's name
    opens_at: datetime | None

    @property
    def total(self) -> int:
        return len(self.sites)


@dataclass
class Chart:
    cid: str
    title: str
    png: bytes


@dataclass
class Picture:
    """One screenshot as a report shows it: a small JPEG drawn from the full-size PNG of the run directory.

    The HTML file carries it inline (a data URI, like the charts); the e-mail as a part named by `cid`."""

    cid: str  # the Content-ID, and the file `<file stem>-<cid>.jpg` under RUN_DIR/report/
    label: str  # "before", "after", "changes"
    path: str  # the full-size image, relative to the run directory (cleaned; "" when the summary names none)
    jpeg: bytes = b""  # empty: not drawn, `problem` says why
    problem: str = ""  # "image missing", "image unreadable", ...

    @property
    def href(self) -> str:
        """The full-size image from the report's folder (RUN_DIR/report/), for the HTML file on disk."""
        return "../" + quote(self.path) if self.path else ""


VIEWPORT_WORDS = {"desktop": "on a computer", "mobile": "on a phone"}


@dataclass
class PageView:
    """One page at one viewport, as a report names it and pictures it."""

    page: str
    viewport: str
    url: str
    band: Band | None
    score: float | None
    paths: dict[str, str]  # label -> full-size image path (before, after, changes), relative to the run directory
    notes: list[str] = field(default_factory=list)  # new failed requests and console errors
    error: str = ""
    pictured: bool = False  # within the mail's cap: its pictures are drawn
    pictures: list[Picture] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page} ({self.viewport})"

    @property
    def client_where(self) -> str:
        """`the home page on a computer`: a client's words for the page."""
        name = "the home page" if self.page == "home" else f"the page {self.page}"
        return f"{name} {VIEWPORT_WORDS.get(self.viewport, self.viewport)}"

    @property
    def changed(self) -> str:
        """`38.2% changed`, or why it could not be judged."""
        if self.score is None:
            return self.error or "not judged"
        return f"{self.score:.1%} changed"

    @property
    def band_word(self) -> str:
        return self.band.value if self.band is not None else "not judged"

    def problem(self, label: str) -> str:
        """Why a pictured image could not be shown ("image missing"), or nothing."""
        return next((picture.problem for picture in self.pictures if picture.label == label), "")


@dataclass
class LookView:
    """One site's look: its band, the words for it, and the pages a report shows (worst first)."""

    site_id: int
    site_name: str
    site_url: str
    band: Band | None
    headline: str
    pages: list[PageView]
    alarmed: bool = False  # shown beside its alarm (the operator's broken sites)

    @property
    def client_caption(self) -> str:
        """What a client reads under the pair: what a visitor sees, never scores or errors."""
        if self.band is Band.broken:
            return "Looked broken after the updates: we have been alerted and are putting it right"
        if self.band is Band.review:
            return "Looks a little different after the updates: we are checking that it is as it should be"
        if self.band is Band.healthy:
            return "Looks as before"
        return "Could not be compared this time"


@dataclass
class Looks:
    """The night's screenshots as one report shows them.

    The operator's: broken and review sites with the pages in that band; a client's: one before/after `pairs`
    per site. Pictures are capped per e-mail (`left_out` counts the pages, or a client's sites, not pictured)."""

    broken: list[LookView] = field(default_factory=list)
    review: list[LookView] = field(default_factory=list)
    unjudged: list[LookView] = field(default_factory=list)
    pairs: list[LookView] = field(default_factory=list)
    healthy: int = 0  # sites that looked as before
    sites: int = 0  # sites with a look, in all
    left_out: int = 0
    folded: list[LookView] = field(default_factory=list)  # sites past the lists' length, without pages: one line each
    totals: dict[Band | None, int] = field(default_factory=dict)  # sites per band, listed or not

    @property
    def more(self) -> int:
        return len(self.folded)

    def total(self, band: Band | None) -> int:
        return self.totals.get(band, 0)

    @property
    def review_total(self) -> int:
        return self.total(Band.review)

    @property
    def broken_total(self) -> int:
        return self.total(Band.broken)

    def site(self, site_id: int | None) -> LookView | None:
        """The broken look shown beside this site's alarm."""
        return next((look for look in self.broken if look.site_id == site_id), None)

    @property
    def unalarmed(self) -> list[LookView]:
        """Broken looks without an alarm shown (more alarms than the report lists): shown after the alarm."""
        return [look for look in self.broken if not look.alarmed]

    @property
    def sentence(self) -> str:
        """The visual checks in one sentence: `12 sites looked as before; 1 looks broken; 2 look different`."""
        if not self.sites:
            return ""
        parts = [f"{count(self.healthy, 'site')} looked as before"] if self.healthy else []
        broken, review, unjudged = self.total(Band.broken), self.total(Band.review), self.total(None)
        if broken:
            parts.append(f"{broken} look{'s' if broken == 1 else ''} broken")
        if review:
            parts.append(f"{review} look{'s' if review == 1 else ''} different, for review")
        if unjudged:
            parts.append(f"{unjudged} could not be compared")
        return "Screenshots before and after the updates: " + "; ".join(parts) + "."


@dataclass
class AgainstDryRun:
    """How the night differed from the dry run before it (the same dashboard and selection, within a day): the
    dry run planned from the dashboard's last syncs, the night syncs first."""

    at: datetime  # when the dry run ran
    planned_from: str  # "the dashboard's last syncs (between … and …)"
    would: int  # items it would update
    updated: int  # of those, updated tonight
    instead: list[tuple[Term, int, int]]  # of those, not updated tonight: the word, the items, their sites
    gone: int = 0  # of those, no longer found tonight (updated by someone else, or the site left the selection)
    unplanned: int = 0  # items updated tonight that the dry run would not have updated

    @property
    def not_updated(self) -> int:
        return sum(items for _, items, _ in self.instead)

    @property
    def sentences(self) -> list[str]:
        """`The dry run of … planned from …: would update 146 items.` `Tonight: updated 139 of them; not updated 7
        of them: skipped 7 (on 2 sites).` and what else tonight found."""
        said = [f"The dry run of {moment(self.at)} planned from {self.planned_from}: "
                f"{WOULD_UPDATE.word} {count(self.would, 'item')}."]
        tonight = f"Tonight: {UPDATED.said(self.updated)} of them"
        if self.instead:
            tonight += f"; {NOT_UPDATED.said(self.not_updated)} of them: " + LIST_SEPARATOR.join(
                f"{term.said(items)} (on {count(sites, 'site')})" for term, items, sites in self.instead)
        said.append(tonight + ".")
        if self.gone:
            said.append(f"{count(self.gone, 'item')} of them no longer found tonight (updated meanwhile, or the "
                        "site is gone).")
        if self.unplanned:
            said.append(f"{UPDATED.title} {count(self.unplanned, 'item')} the dry run would not have updated (new "
                        "since the sync it planned from, or on a site it could not plan).")
        return said


@dataclass
class ReportData:
    """Everything one report shows; `client` is None for the operator's whole-fleet report."""

    client: str | None
    run_id: str
    started_at: datetime
    finished_at: datetime
    dry_run: bool
    dashboard: str | None
    headline: Headline
    updated: Rows[UpdatedSite]  # the first items in full, by site; the rest folded (a site may be in both)
    not_done: list[NotDoneGroup]
    plugin_failures: Rows[PluginFailure]
    checks: Checks
    by_type: list[BreakdownRow]
    by_client: list[BreakdownRow]
    trends: list[TrendRow]
    plugin_trend: list[PluginFailure]
    problems: list[str] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    broken: Rows[Alarm] = field(default_factory=Rows)
    already_down: Rows[Alarm] = field(default_factory=Rows)
    night_holds: list[HoldRow] = field(default_factory=list)
    incidents: list[IncidentRow] = field(default_factory=list)  # the operator's: open, and closed tonight
    deferred: list[DeferredGroup] = field(default_factory=list)
    left_out: str = ""  # a client's ignored and excluded items, in one sentence
    approval: str | None = None  # what the approval gate decided, in a sentence
    revived: str | None = None  # the sites brought back to maintenance tonight, in a sentence before their names
    revived_sites: Rows[str] = field(default_factory=Rows)
    looks: Looks = field(default_factory=Looks)  # the night's screenshots (the policy's `visual:`)
    planned_from: str = ""  # a dry run: what it planned from, so that the real night may differ
    against_dry_run: AgainstDryRun | None = None  # the operator's: how the night differed from the dry run
    reply_to: str | None = None  # a client's: where a reply to its report goes (None: no promise of an answer)
    vulnerabilities: VulnerabilitySection | None = None  # known vulnerabilities: fixes installed, held, without a fix

    @property
    def voice(self) -> Voice:
        return self.headline.voice

    @property
    def incidents_open(self) -> list[IncidentRow]:
        return [incident for incident in self.incidents if not incident.closed]

    @property
    def incidents_closed(self) -> list[IncidentRow]:
        return [incident for incident in self.incidents if incident.closed]

    @property
    def incidents_title(self) -> str:
        """`2 open incidents: 1 site down`."""
        down = sum(1 for incident in self.incidents_open if incident.down)
        still = f": {count(down, 'site')} down" if down else ""
        return f"{count(len(self.incidents_open), 'open incident')}{still}"

    @property
    def trends_title(self) -> str:
        """The operator's runs (a dry run's trend is of dry runs); a client's nights."""
        return f"Trends, last {len(self.trends)} {'runs' if self.client is None else 'nights'}"

    @property
    def updated_more(self) -> int:
        """The updated items folded in the HTML."""
        return sum(len(site.items) for site in self.updated.folded)

    @property
    def updated_folded(self) -> list[tuple[UpdatedSite, UpdatedItem]]:
        """The folded updated items, one row each with its site."""
        return [(site, item) for site in self.updated.folded for item in site.items]

    @property
    def listed_in(self) -> str:
        """Where a list the text and Markdown reports shorten is whole: the HTML report (for the operator, also
        summary.json; a client is told nothing internal)."""
        if self.client is None:
            return " (all are in the HTML report and in summary.json)"
        return " (all are in the HTML version of this e-mail)"

    @property
    def subject(self) -> str:
        day = self.started_at.strftime("%d %b %Y")
        who = f"{self.client}: " if self.client is not None else "Fleet "
        dry = " (dry run)" if self.dry_run else ""
        alarm = f"BROKE {count(self.headline.broken, 'site').upper()}: " if self.headline.broken else ""
        down = sum(1 for incident in self.incidents_open if incident.down)
        if down and not alarm:
            alarm = f"{count(down, 'site').upper()} STILL DOWN: "
        return f"{alarm}{who}maintenance report {day}{dry}: {self.headline.subject_counts}"
