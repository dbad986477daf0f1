"""The run summary: the contract between the pipeline and the reports (`summary.json`).

A report needs nothing but this file; every item found at detection appears here with exactly one outcome.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from dashboard.models import UpdateType
from fleet.model.vulnerability import (
    FeedStatus,
    ItemVulnerabilities,
    VulnerabilityNews,
    VulnerabilityStats,
    VulnerableInstall,
)

SUMMARY_FILE = "summary.json"
DRY_RUN_RULE = "dry_run"  # the rule of a dry run's items it would apply (their outcome: excluded)


def run_directories(report_dir: Path) -> list[Path]:
    """The run directories under `report_dir` that hold a summary, oldest first: by the moment their run id
    starts with (to the second), then, for two runs of the same second, by when each was last written."""
    if not report_dir.is_dir():
        return []
    found = [path for path in report_dir.iterdir() if (path / SUMMARY_FILE).is_file()]
    return sorted(found, key=lambda path: (path.name[:15], (path / SUMMARY_FILE).stat().st_mtime_ns))


def run_suffix(flow_run_id: str) -> str:
    """The end of a run id that tells its flow run: the flow run id's last 8 hex digits. Prefect's ids are
    time-ordered (UUIDv7): runs created together, as a scheduler creates them, share their first digits."""
    return flow_run_id.replace("-", "")[-8:]


class Outcome(StrEnum):
    updated = "updated"  # the version moved
    failed = "failed"  # an error was reported
    unchanged = "unchanged"  # reported fine but the version did not move
    held = "held"  # a policy hold (reason, optional expiry, optional pin)
    ignored = "ignored"  # on the dashboard's global or per-site ignore list
    delayed = "delayed"  # minimum age not reached yet
    excluded = "excluded"  # policy: type off, semver rule, allow-list, not selected, cohort stopped
    skipped = "skipped"  # site offline, suspended, disconnected or child too old
    deferred = "deferred"  # outside the site's maintenance window or in a blackout: not touched tonight
    unknown = "unknown"  # no answer
    not_switched_on = "not_switched_on"  # installed switched off (the way back), and switching it on failed: never ran


NOT_ATTEMPTED = frozenset(
    {Outcome.held, Outcome.ignored, Outcome.delayed, Outcome.excluded, Outcome.skipped, Outcome.deferred}
)


@cache
def _field_names(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


class Record(BaseModel):
    """A model made once per item or per site: tens of thousands of them in a night at 10,000 sites.

    Pydantic gives every instance its own set of the field names it was given (about 0.7 KB, more than the
    values it holds); records share one set of all their field names instead. Nothing reads which fields were
    given (`exclude_unset`), and assigning a field only adds a name the set already holds.
    """

    def model_post_init(self, context: Any, /) -> None:
        object.__setattr__(self, "__pydantic_fields_set__", _field_names(type(self)))


class Item(Record):
    """One pending update on one site, and what became of it."""

    model_config = ConfigDict(extra="ignore")

    site_id: int
    site_url: str
    site_name: str
    client: str | None = None
    type: UpdateType
    slug: str
    name: str
    from_version: str | None = None
    to_version: str | None = None
    outcome: Outcome
    reason: str | None = Field(None, description="Why it was not updated, or the error reported.")
    rule: str | None = Field(None, description="The policy rule or check that decided a not-attempted outcome.")
    until: date | None = Field(None, description="Hold expiry or the date a delayed item becomes eligible.")
    opens_at: datetime | None = Field(None, description="A deferred item: when its site's window next opens.")
    cohort: str | None = None
    suspect: bool = Field(False, description="Applied to a site the night broke: a suspect of the breakage.")
    approved_by: str | None = Field(None, description="An item that needed approval: who approved it.")
    applied_by_run: str | None = Field(
        None, description="The interrupted run that applied this item (accounted for by this run).")
    # `security` (here and in ItemVulnerabilities), `exposure`, `exposure_stats`, `security_news`, `security_run`:
    # persisted summary.json names, kept as they are so that every old summary still reads (the glossary is in
    # fleet.model.vulnerability's docstring).
    security: ItemVulnerabilities | None = Field(
        None, description="What the update means for the site's security: the vulnerabilities it fixes and those it "
        "leaves open (the vulnerability feed); None: not classed.")
    fix_waited_hours: float | None = Field(
        None, description="A security fix installed tonight: the hours from its fix first offered to the site to "
        "tonight (the state database's memory; None in a dry run or without a feed).")


class HealthCheck(Record):
    """Health of one site after the updates."""

    model_config = ConfigDict(extra="ignore")

    online: bool | None = None
    http_code: int | None = None
    response_ms: float | None = None
    probe_ok: bool | None = None
    probe_error: str | None = None
    open_incidents: int = 0  # the uptime monitors' open alerts (MainWP's "incidents"; ours are the nights' breaks)
    error: str | None = None
    before_ok: bool | None = Field(None, description="The home-page probe before the updates (None: not probed).")
    before_error: str | None = None
    unverified: str | None = Field(None, description="The dashboard's check could not be read (its answer was lost, "
                                   "and again when re-run): why. Nothing was seen failing: the site is not judged "
                                   "on it.")

    @property
    def healthy(self) -> bool:
        return self.error is None and self.online is not False and self.probe_ok is not False

    @property
    def problem(self) -> str:
        """What the check saw, in one line."""
        if self.error or self.probe_error:
            return self.error or self.probe_error or ""
        if self.online is False:
            return f"the dashboard's check found the site offline (HTTP {self.http_code})" if self.http_code \
                else "the dashboard's check found the site offline"
        return ""


class SiteReport(Record):
    model_config = ConfigDict(extra="ignore")

    site_id: int
    site_url: str
    site_name: str
    client: str | None = None
    status: str = "online"  # online | offline | suspended | disconnected | child_too_old
    updated: bool = False
    check: HealthCheck | None = None
    deferred: str | None = Field(None, description="Why the site was not touched tonight (window or blackout).")
    opens_at: datetime | None = Field(None, description="When the deferred site's window next opens.")
    revived: bool = Field(False, description="The dashboard refused it as known offline; checked tonight, it "
                          "answered, so it was synced and maintained again.")


class Suspect(BaseModel):
    """An update applied to a site the night broke."""

    type: UpdateType
    slug: str
    name: str
    from_version: str | None = None
    to_version: str | None = None
    outcome: Outcome = Outcome.updated


class ContainmentStatus(StrEnum):
    contained = "contained"  # the culprit found and left deactivated: the site answers again
    not_contained = "not_contained"  # deactivating the step's plugins did not bring it back: all switched back on
    reported = "reported"  # the policy (contain: report, never_deactivate) left the site as it was
    not_plugins = "not_plugins"  # a theme, core or translation step: only plugins can be deactivated
    unreachable = "unreachable"  # the MainWP Child no longer answers: the dashboard can do nothing
    revived = "revived"  # dead at load, brought back through its Fleet Guard: the last working version active again


class Containment(BaseModel):
    """What the night did about a site that failed its home-page probe after one update step."""

    step: UpdateType = Field(description="The update step after which the probe failed.")
    saw: str = Field("", description="What that probe saw.")
    status: ContainmentStatus
    culprit: Suspect | None = Field(None, description="The plugin whose deactivation brought the site back (or the "
                                    "release a revival found and put the kept version of back).")
    rounds: int = Field(0, description="Deactivate/re-activate rounds the bisection probed.")
    detail: str = Field("", description="What was done, in words.")
    next_steps: str = Field("", description="What the operator should do now.")
    never_ran: bool = Field(False, description="The culprit is a release installed switched off (the way back) "
                            "that could not be switched on: it never ran on the site.")

    @property
    def headline(self) -> str:
        """The site's state in a few words, as the reports say it."""
        if self.status is ContainmentStatus.contained and self.culprit:
            return f"broken, then contained: {self.culprit.name or self.culprit.slug} deactivated"
        if self.status is ContainmentStatus.unreachable:
            return "down, unreachable by the dashboard"
        if self.status is ContainmentStatus.revived and self.culprit:
            return (f"down, then revived by the night: {self.culprit.name or self.culprit.slug} "
                    f"{self.culprit.from_version or ''} put back".replace("  ", " "))
        return "broken"


class SiteAlarm(BaseModel):
    """A site that fails its check after the night: broken by it (with the suspects), or already down before."""

    site_id: int
    site_url: str
    site_name: str
    client: str | None = None
    saw: str = Field(description="What the check after the updates saw (or the probe before, when already down).")
    dashboard_page: str | None = Field(None, description="The site's page on the dashboard.")
    suspects: list[Suspect] = Field(default_factory=list)
    containment: Containment | None = Field(None, description="What the night did about the break (per-step probe).")


class Band(StrEnum):
    """How a page looks after an update, against its baselines (`fleet.visual.diff`)."""

    healthy = "healthy"  # below the policy's `pass` share of changed pixels
    review = "review"  # between `pass` and `fail`: a person should look
    broken = "broken"  # above `fail`: a visual break, handled as an HTTP break is


BAND_ORDER = (Band.healthy, Band.review, Band.broken)


class PageLook(BaseModel):
    """One page at one viewport: its band and the images that show it. Paths are relative to the run directory."""

    page: str
    viewport: str
    url: str
    band: Band | None = Field(None, description="None: it could not be judged (`error` says why).")
    score: float | None = Field(None, description="Share of pixels changed outside the noise mask.")
    before: str | None = None
    after: str | None = None
    diff: str | None = None
    new_console_errors: list[str] = Field(default_factory=list)
    new_failed_requests: list[str] = Field(default_factory=list)
    error: str | None = None


class SiteLook(BaseModel):
    """What a visitor saw of one site tonight: the worst look of the night, the first step that showed it (its
    `before` is the shot before that step)."""

    site_id: int
    site_url: str
    site_name: str
    client: str | None = None
    step: UpdateType | None = Field(None, description="The update step after which the pages were shot.")
    band: Band | None = Field(None, description="The worst page's band; None: no page could be judged.")
    pages: list[PageLook] = Field(default_factory=list)

    @property
    def worst(self) -> PageLook | None:
        """The page that decided the band (the highest score among the worst band's pages)."""
        judged = [page for page in self.pages if page.band is not None]
        if not judged:
            return None
        return max(judged, key=lambda page: (BAND_ORDER.index(page.band), page.score or 0.0))  # type: ignore[arg-type]

    @property
    def headline(self) -> str:
        """The site's look in a few words, as the reports say it."""
        page = self.worst
        if page is None or self.band is None:
            errors = {p.error for p in self.pages if p.error}
            return f"not judged: {'; '.join(sorted(errors)) or 'no screenshots'}"
        where = f"{page.page} ({page.viewport})"
        changed = f"{(page.score or 0):.1%} of {where} changed" if page.score is not None else page.error or where
        extra = page.new_failed_requests[:1] + page.new_console_errors[:1]
        said = f"{changed}{': ' + '; '.join(extra) if extra else ''}"
        return {Band.healthy: "looks as before", Band.review: f"looks different, for review: {said}",
                Band.broken: f"looks broken: {said}"}[self.band]


class HoldKind(StrEnum):
    """Why the nights hold a version: the evidence behind it."""

    culprit = "culprit"  # it broke a site on its own (found by bisection, or the only update of the step)
    suspect = "suspect"  # applied in the step that broke a site whose culprit was not found
    failures = "failures"  # it failed to install on several sites (or WordPress rolled it back)


class NightHold(BaseModel):
    """A version the nights remember as bad: held fleet-wide until an operator releases it or the evidence has
    gone (no open incident names it and whole-fleet nights saw it offered nowhere for the policy's days)."""

    type: UpdateType
    slug: str
    name: str = ""
    version: str
    reason: str
    site: str | None = Field(None, description="The site it broke or first failed on.")
    since: date
    kind: HoldKind = HoldKind.culprit
    quiet_days: int = Field(0, description="Days with a whole-fleet night that saw it offered nowhere, since it "
                            "was last offered anywhere.")
    last_offered: date | None = Field(None, description="The last day a night saw a site offered it.")
    ends: str = Field("", description="When it would end, in words (as the night that wrote it saw it).")

    @property
    def item(self) -> str:
        return f"{self.type.value}:{self.slug}"

    def age_days(self, today: date) -> int:
        return (today - self.since).days


class Incident(BaseModel):
    """A site a night broke, open across nights until a later check passes and nothing a night switched off is
    still off, or until an operator closes it (`fleet incidents close`). Kept in the state database."""

    id: int = 0  # given by the state database
    dashboard: str = Field(description="The dashboard the site is on (its URL, never a credential).")
    site_id: int
    site_url: str
    site_name: str
    client: str | None = None
    opened_by: str = Field(description="The run that broke the site.")
    opened_at: datetime
    status: str = Field(description="What that night left it: contained, unreachable, not_contained, reported, "
                        "not_plugins, or broken.")
    saw: str = ""
    culprit: Suspect | None = None
    suspects: list[Suspect] = Field(default_factory=list)
    last_good: str | None = Field(None, description="The culprit's version that last worked on the site, before the "
                                  "incident's first break: what to restore (never a version a break since held).")
    done: str = Field("", description="What the nights did about it, in words.")
    next_steps: str = ""
    dashboard_page: str | None = None
    deactivated: list[str] = Field(default_factory=list, description="Plugins a night switched off on the site.")
    down: bool = Field(True, description="At the last look, the site failed its check.")
    last_look: str = Field("", description="What the last look at the site saw, and when.")
    alerted_on: date | None = Field(None, description="The day the operator was last alerted about it.")
    closed_at: datetime | None = None
    closed_by: str | None = Field(None, description="The run whose check closed it, or `operator`.")
    close_reason: str | None = None

    @property
    def is_open(self) -> bool:
        return self.closed_at is None

    def age_days(self, today: date) -> int:
        return max(0, (today - self.opened_at.date()).days)

    @property
    def headline(self) -> str:
        """Its state now, in a few words."""
        if not self.is_open:
            return f"closed: {self.close_reason}"
        if self.down:
            return "down, unreachable by the dashboard" if self.status == "unreachable" else "down"
        if self.deactivated:
            names = [self.culprit.name or slug if self.culprit and self.culprit.slug == slug else slug
                     for slug in self.deactivated]
            return f"up, with {', '.join(names)} still deactivated"
        return "up, waiting for a check"


class ReportClient(BaseModel):
    """A dashboard client, so that a per-client report can be addressed."""

    model_config = ConfigDict(extra="ignore")

    name: str
    email: str | None = None
    recipients: list[str] = Field(default_factory=list, description="Report recipients (policy overrides e-mail).")
    held_for_review: str | None = Field(
        None, description="Why the automatic e-mail to this client is held for the operator's review."
    )
    reply_to: str | None = Field(None, description="Where the client's replies go (the policy's `reply_to`).")


class Job(BaseModel):
    """A background batch job the pipeline waited on."""

    model_config = ConfigDict(extra="ignore")

    id: str
    type: str
    sites: int
    status: str
    seconds_waited: float
    polls: int
    reason: str | None = None


class Cohort(BaseModel):
    name: str
    sites: int
    failures: int = 0
    status: str = "completed"  # completed | stopped | not_started
    reason: str | None = None


class Delivery(BaseModel):
    """The fate of one report message at one recipient."""

    report: str  # "operator" or the client's name
    recipient: str
    accepted: bool
    answer: str
    eml_path: str | None = None
    held: bool = Field(False, description="Held for the operator's review, not sent to the recipient.")
    at: datetime = Field(default_factory=lambda: datetime.now(UTC), description="When it was sent or written.")


class Counts(BaseModel):
    by_outcome: dict[Outcome, int] = Field(default_factory=dict)
    by_type: dict[UpdateType, int] = Field(default_factory=dict)


class Selection(BaseModel):
    """Which sites and update types a run covers."""

    sites: list[str] = Field(default_factory=list, description="Site ids or domains; empty means all.")
    tags: list[str] = Field(default_factory=list, description="Tag names; a site with any of them is chosen.")
    clients: list[str] = Field(default_factory=list, description="Client names; a site of any of them is chosen.")
    types: list[UpdateType] = Field(
        default_factory=lambda: list(UpdateType), description="Update types to apply; the others are excluded."
    )

    @property
    def covers_every_site(self) -> bool:
        """No site, tag or client named: every site of the dashboard is listed (the types filter only the plan)."""
        return not (self.sites or self.tags or self.clients)


class ApprovalRecord(BaseModel):
    """The night's approval gate: when it opened, how it ended, who answered."""

    opened_at: datetime
    items: int = Field(description="Items that waited for a person.")
    approved: int = 0
    skipped: int = 0
    timed_out: bool = False
    answered_by: str | None = None
    flow_run_id: str | None = None


class LastSync(BaseModel):
    """When the dashboard last synced the selected sites: what a dry run planned from (it sends no sync)."""

    oldest: datetime
    newest: datetime

    @classmethod
    def of(cls, moments: list[datetime | None]) -> LastSync | None:
        known = [moment for moment in moments if moment is not None]
        return cls(oldest=min(known), newest=max(known)) if known else None


class DashboardWork(BaseModel):
    """Site operations the night asked of the dashboard, against the naive chain (sync all, update, check all,
    re-sync all), and the modelled seconds of each at the times per unit the night measured."""

    syncs: int = 0
    update_items: int = 0
    checks: int = 0
    naive_syncs: int = 0
    naive_checks: int = 0
    seconds: float | None = None
    naive_seconds: float | None = None


class Summary(BaseModel):
    """Everything one run did, as written to `summary.json`."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    started_at: datetime
    finished_at: datetime
    dry_run: bool = False
    security_run: bool = Field(False, description="A security run between nights: only the fixes at or above the "
                               "policy's threshold, on the sites offered one.")
    planned_for: datetime | None = Field(None, description="A rehearsal (`--at`): the moment the plan was made for.")
    last_sync: LastSync | None = Field(None, description="A dry run: the dashboard's last syncs it planned from.")
    dashboard: str | None = None
    selection: Selection = Field(default_factory=Selection)
    # the alarms come before the items in summary.json, so that a reader of the head sees them early
    broken: list[SiteAlarm] = Field(default_factory=list, description="Sites healthy before and failing after.")
    already_down: list[SiteAlarm] = Field(default_factory=list, description="Sites failing before the updates.")
    incidents: list[Incident] = Field(default_factory=list, description="The dashboard's open incidents after this "
                                      "night (those it opened too), and those it closed.")
    holds: list[NightHold] = Field(default_factory=list, description="Versions the nights hold, new ones included.")
    approval: ApprovalRecord | None = None
    counts: Counts = Field(default_factory=Counts)
    items: list[Item] = Field(default_factory=list)
    sites: list[SiteReport] = Field(default_factory=list)
    clients: list[ReportClient] = Field(default_factory=list)
    jobs: list[Job] = Field(default_factory=list)
    cohorts: list[Cohort] = Field(default_factory=list)
    deliveries: list[Delivery] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list, description="Run-level problems (a step that failed).")
    interrupted: bool = Field(False, description="The run was killed before it finished; see `accounted_by`.")
    accounted_by: str | None = Field(None, description="The later run that accounted for this run's items.")
    accounts_for: list[str] = Field(default_factory=list, description="Interrupted runs whose items are here.")
    work: DashboardWork | None = Field(None, description="The work this night asked of the dashboard.")
    looks: list[SiteLook] = Field(default_factory=list, description="The visual checks (the policy's `visual:`).")
    vulnerability_feed: FeedStatus | None = Field(None, description="The copy of the vulnerability feed the "
                                                  "items were matched against (its age, its last problem).")
    # exposure, security_news, exposure_stats: persisted names, kept (see Item.security)
    exposure: list[VulnerableInstall] = Field(default_factory=list, description="Installed items with a known "
                                              "vulnerability and no update pending: vulnerable, no fix offered.")
    unchecked_sites: list[int] = Field(default_factory=list, description="Selected sites whose installed items "
                                       "could not be matched (never read as clean).")
    security_news: list[VulnerabilityNews] = Field(
        default_factory=list, description="What the operator is told of once tonight: a new vulnerability with no fix "
        "and a fix first offered and not installed, at or above the policy's threshold (alerted with the summary).")
    exposure_stats: VulnerabilityStats | None = Field(None, description="Exposure across nights on this dashboard: "
                                                      "open now, and the time from a fix offered to patched.")
    did_nothing: str | None = Field(None, description="Why the night did nothing it was there to do: it synced no "
                                    "site, or attempted none of its updates (the run fails and alerts).")

    @staticmethod
    def count(items: list[Item]) -> Counts:
        counts = Counts()
        for item in items:
            counts.by_outcome[item.outcome] = counts.by_outcome.get(item.outcome, 0) + 1
            counts.by_type[item.type] = counts.by_type.get(item.type, 0) + 1
        return counts

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        return write_atomically(run_dir / SUMMARY_FILE, _SUMMARY_JSON.dump_json(self, indent=2))

    @classmethod
    def read(cls, run_dir: Path) -> Summary:
        path = run_dir / SUMMARY_FILE if run_dir.is_dir() else run_dir
        return cls.model_validate_json(path.read_bytes())


_SUMMARY_JSON = TypeAdapter(Summary)


def write_atomically(path: Path, content: bytes) -> Path:
    """Write beside the file, then replace it: a reader never sees half a file (bytes: no second copy as str)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(content)
    tmp.replace(path)
    return path
