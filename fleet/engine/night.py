"""The night's engine, without Prefect: what every step of one run shares, what the cohorts gather, and the
rules between the steps (which sites are synced, which were worked on, a window that closes mid-night, the
rollout's verdicts, an approval settled, the work against the naive chain, an interrupted run closed out).

The flows (`flows.update`) say the order of the night and run its steps as Prefect tasks; everything they
decide on the way is asked of this module.
"""

from __future__ import annotations

import gc
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from dashboard.home import SettingsError
from fleet.engine.containment import TonightsBreaks
from fleet.engine.interrupted import account_interrupted, given_up
from fleet.engine.lanes import Lane, without_sites
from fleet.engine.run_summary import build_summary, clients_with_recipients, dashboard_work, interrupted_summary
from fleet.engine.visual_watch import VisualWatch
from fleet.engine.vulnerability_review import NightVulnerabilities
from fleet.model.settings import PipelineSettings
from fleet.model.summary import (
    ApprovalRecord,
    Cohort,
    HealthCheck,
    Item,
    LastSync,
    Outcome,
    ReportClient,
    Selection,
    Summary,
)
from fleet.model.vocabulary import (
    AWAITING_APPROVAL,
    LIST_SEPARATOR,
    TO_UPDATE,
    WOULD_UPDATE,
    Term,
    count,
    operator_voice,
    planned_from,
)
from fleet.pacing.call_sizing import CallSizer
from fleet.pacing.progress import NightProgress
from fleet.rules.approval import ApprovalAnswer, settle
from fleet.rules.empty_night import nothing_done
from fleet.rules.execution import CallResult, JobEnding, JobOutcome
from fleet.rules.plan import Decision, Plan, SiteRecord, SiteStatus
from fleet.rules.policy import Policy, load_policy
from fleet.rules.reconcile import summary_item
from fleet.rules.rollout import failed_sites, judge_cohort, stop_cohorts
from fleet.rules.windows import place_in_windows
from fleet.state.job_journal import JobJournal, OpenRun
from fleet.state.maintenance_log import MaintenanceLog

YOUNG_COLLECTION = 20_000  # allocations between two collections of the youngest generation (Python's: 700)


def collect_less() -> None:
    """Fewer garbage collections for the night: what the process holds before it (Prefect, the client, the
    libraries: most of its heap) is frozen out of every later full collection, and the youngest generation is
    collected every 20,000 allocations instead of 700. A 1,000-site night spent 1.4 s of its CPU in the collector,
    0.8 s of it in 8 full collections scanning that heap; the night's objects are long-lived (the plan, the
    summary), so collecting them often finds little."""
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_COLLECTION), middle, old)


def pipeline_settings(report_dir: str) -> PipelineSettings:
    """The `FLEET_*` settings, with the flow's report directory if it gave one."""
    return PipelineSettings(**({"report_dir": Path(report_dir)} if report_dir else {}))


class NightRequest(BaseModel):
    """The arguments every maintaining flow shares, as one value (the flows keep their own typed parameters,
    which the Prefect UI shows as the run form)."""

    selection: Selection = Field(default_factory=Selection)
    dry_run: bool = False
    policy_file: str = ""
    report_dir: str = ""
    run_checks: bool = True
    at: datetime | None = None
    fixes_only: bool = False  # a security run between nights: only the fixes at or above the policy's threshold

    def moment(self, now: datetime) -> datetime:
        """The moment the night plans for: now, or `at` for a dry run (rehearsing windows and blackouts)."""
        if self.at is None:
            return now
        if not self.dry_run:
            raise ValueError("`at` rehearses a plan: it is refused for a run that writes (use it with a dry run)")
        return self.at.replace(tzinfo=UTC) if self.at.tzinfo is None else self.at

    def settings_and_policy(self) -> tuple[PipelineSettings, Policy]:
        """The settings and the policy file (a bad one fails here, before any request, naming the variable or the
        file and field); a policy that asks for checks of every site with planned work turns `check_all_sites` on."""
        try:
            settings = pipeline_settings(self.report_dir)
        except ValidationError as error:
            raise SettingsError.of(error) from None
        path = self.policy_path(settings)
        policy = load_policy(path) if path else Policy()
        if policy.check_all_sites:
            settings = settings.model_copy(update={"check_all_sites": True})
        return settings, policy

    def policy_path(self, settings: PipelineSettings) -> Path | None:
        """The policy file the night reads (the request's, else FLEET_POLICY_FILE), None for none."""
        return Path(self.policy_file) if self.policy_file else settings.policy_file


@dataclass
class CohortResult:
    """What a lane, a cohort, or the whole night gave: outcomes, the jobs waited on, checks, errors, re-syncs."""

    items: list[Item] = field(default_factory=list)
    jobs: list[JobOutcome] = field(default_factory=list)
    checks: dict[int, HealthCheck] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    resynced: int = 0

    def add(self, other: CohortResult) -> None:
        self.items += other.items
        self.jobs += other.jobs
        self.checks |= other.checks
        self.errors += other.errors
        self.resynced += other.resynced

    @classmethod
    def lane_failed(cls, cohort: str, lane: Lane, error: Exception) -> CohortResult:
        """A lane whose step failed after its retries: its items are unknown, and the night says why. An item the
        lane sent to the approval gate (a version under review) is the gate's to account for."""
        sites = {site.id: site for site in lane.sites}
        reason = f"the run could not verify it: {error}"
        return cls(items=[summary_item(item, sites[item.site_id], Outcome.unknown, reason) for item in lane.items
                          if item.decision is not Decision.awaiting_approval],
                   errors=[f"cohort {cohort!r}, lane {lane.label}: a step failed: {error}"])


def sites_to_sync(sites: list[SiteRecord], settings: PipelineSettings, now: datetime) -> list[SiteRecord]:
    """The usable sites, less those deferred by their window and those the dashboard synced within
    `FLEET_FRESH_SYNC_HOURS`."""
    return [site for site in sites if site.status is SiteStatus.online and site.deferral is None
            and not site.synced_within(settings.fresh_sync_hours, now)]


def worked_on(calls: list[CallResult]) -> set[int]:
    """Sites where something may have been applied: a call that queued a job, lost its answer, or reported an
    item done. A site whose calls all failed outright is not re-synced: its last list still holds."""
    sites = set()
    for call in calls:
        if call.job_id or call.lost or call.call.per_site:
            sites.update(call.call.site_ids)
        sites.update(report.site_id for report in call.reports if report.ok)
    return sites


def close_late_sites(lane: Lane, now: datetime) -> tuple[Lane, CohortResult]:
    """A window that closed while earlier lanes ran: no new calls for its sites, whose items are deferred."""
    late = {site.id: site for site in lane.sites if site.window_closes_at is not None and site.window_closes_at <= now}
    if not late:
        return lane, CohortResult()
    lane, closed = without_sites(lane, set(late))
    reason = "deferred: its maintenance window closed before it was reached"
    return lane, CohortResult(items=[summary_item(item, late[item.site_id], Outcome.deferred, reason)
                                     for item in closed])


def jobs_done(outcomes: list[JobOutcome]) -> list[str]:
    """The jobs that leave the journal: finished, or gone from the dashboard (expired, not found)."""
    return [outcome.job.id for outcome in outcomes
            if outcome.finished or outcome.job.status in (JobEnding.expired, JobEnding.not_found)]


@dataclass
class WindowDays:
    """The once-per-window rule: a run that writes maintains a site with a maintenance window at most once per
    window (hourly runs would otherwise touch it every hour its window is open)."""

    log: MaintenanceLog | None  # None: the rule is off (no windows, or a dry run)
    dashboard: str
    days: dict[int, date] = field(default_factory=dict)

    @classmethod
    def of(cls, policy: Policy, request: NightRequest, settings: PipelineSettings, dashboard: str) -> WindowDays:
        """Off for a dry run, and for a security run: a fix between nights never spends a site's window, nor waits
        for the next one because a night used this one."""
        on = bool(policy.windows) and not request.dry_run and not request.fixes_only
        return cls(MaintenanceLog(settings.state_path) if on else None, dashboard)

    def place(self, sites: list[SiteRecord], policy: Policy, moment: datetime) -> list[SiteRecord]:
        """Each site with its deferral, or the moment its window closes."""
        maintained = self.log.last_days(self.dashboard) if self.log else None
        sites, self.days = place_in_windows(sites, policy.windows, policy.blackouts, moment, maintained)
        return sites

    def record(self, run_id: str) -> None:
        if self.log:
            self.log.record(self.dashboard, self.days, run_id)


@dataclass
class Night:
    """What every step of one run shares: its id, the call sizer that learns from every answer, the progress,
    and what the cohorts gave so far."""

    run_id: str
    sizer: CallSizer
    policy: Policy = field(default_factory=Policy)
    progress: NightProgress = field(default_factory=NightProgress)
    breaks: TonightsBreaks = field(default_factory=TonightsBreaks)
    done: CohortResult = field(default_factory=CohortResult)
    cohorts: list[Cohort] = field(default_factory=list)
    naive_syncs: int = 0  # what the naive chain would have synced: every usable site
    visual: VisualWatch | None = None  # the policy's `visual:` checks, while the night runs
    notes: list[str] = field(default_factory=list)  # about its memory (moved, or found empty): in the report too
    synced: int = 0  # sites its own sync reached (of `progress.synced.total`)
    vulnerabilities: NightVulnerabilities | None = None  # the pending items classed against the vulnerability feed
    said: int = 0  # the notes the run's log has said

    def unsaid_notes(self) -> list[str]:
        """The notes not yet said in the run's log (each is said once, and all go in the summary)."""
        notes, self.said = self.notes[self.said:], len(self.notes)
        return notes

    def open(self, journal: JobJournal, run_dir: Path, dry_run: bool, flow_run_id: str | None,
             dashboard: str) -> list[OpenRun]:
        """Start the run in the journal (a run that writes); returns the killed runs this one accounts for. Those
        that runs before this one took over and never finished are closed at once, their items unknown: whatever
        killed those runs must not pass them on for ever."""
        if dry_run:
            return []
        interrupted = journal.open_runs(self.run_id)
        journal.start_run(self.run_id, run_dir, flow_run_id)
        journal.taken_over(interrupted)
        for run in (run for run in interrupted if run.given_up):
            items = account_interrupted([run], {}, [])
            interrupted_summary(run, items, self.run_id, dashboard, datetime.now(UTC)).write(run.run_dir)
            journal.accounted(run.run_id, self.run_id)
            self.notes.append(f"the interrupted run {run.run_id} is closed with its {count(len(items), 'item')} "
                              f"unknown: {given_up(run)}")
        return interrupted

    def expect(self, sites: list[SiteRecord], settings: PipelineSettings, now: datetime, dry_run: bool) -> None:
        """The syncs the progress counts towards, and the naive chain's, before anything is sent."""
        self.progress.synced.total = 0 if dry_run else len(sites_to_sync(sites, settings, now))
        self.naive_syncs = sum(1 for site in sites if site.status is SiteStatus.online)

    def planned(self, plan: Plan, request: NightRequest) -> str:
        """Set the progress totals from the plan; returns the plan line: its sites and items, and its decisions in
        the words the summary will count them in (a dry run's: what it would update, and what it planned from)."""
        decided = Counter(item.decision for item in plan.items)
        self.progress.applied.total = 0 if request.dry_run else decided.get(Decision.apply, 0)
        if request.run_checks and not request.dry_run:  # at most: only the sites something was applied to
            self.progress.checked.total = len({item.site_id for item in plan.items if item.decision is Decision.apply})
        voice = operator_voice(request.dry_run)
        words = {Decision.apply: WOULD_UPDATE if request.dry_run else TO_UPDATE,
                 # a dry run does not pause at the gate: its summary lists the waiting items held
                 Decision.awaiting_approval: voice.term(Outcome.held) if request.dry_run else AWAITING_APPROVAL}
        counted: Counter[Term] = Counter()
        for decision, number in decided.items():
            counted[words.get(decision) or voice.term(Outcome(decision.value))] += number
        order = [words[Decision.apply], *voice.ordered(), AWAITING_APPROVAL]
        listed = LIST_SEPARATOR.join(term.said(counted[term]) for term in dict.fromkeys(order) if counted[term])
        line = (f"{'dry-run plan' if request.dry_run else 'plan'}: {count(len(plan.sites), 'site')}, "
                f"{count(len(plan.items), 'item')}" + (f": {listed}" if listed else ""))
        if request.dry_run:
            line += f"; {planned_from(LastSync.of([site.last_sync for site in plan.sites]))}"
        return line

    def judge(self, plan: Plan, position: int, result: CohortResult) -> Cohort:
        """Add a cohort's result; its verdict (a stopped one stops the cohorts after it too)."""
        self.done.add(result)
        broke = {item.site_id for item in result.items} & set(self.breaks.containments)  # contained ones too
        verdict = judge_cohort(plan.cohorts[position], len(failed_sites(result.items, result.checks) | broke))
        self.cohorts.append(verdict)
        if verdict.status == "stopped":
            self.cohorts += stop_cohorts(plan, plan.cohorts[position + 1 :], verdict)
        return verdict

    def approved(self, plan: Plan, answer: ApprovalAnswer) -> Plan | None:
        """The plan of the items a person approved (None if nothing was), counted in the progress."""
        approved = settle(plan, answer)
        if approved is not None:
            self.progress.applied.total += len(approved.items)
        return approved

    def summary(
        self, request: NightRequest, plan: Plan, *, accounted: list[Item], sites: list[SiteRecord],
        clients: list[ReportClient], policy: Policy, dashboard: str, approval: ApprovalRecord | None,
        interrupted: list[OpenRun],
    ) -> Summary:
        """summary.json of the night, with the work asked of the dashboard against the naive chain's."""
        done = self.done
        summary = build_summary(
            plan=plan, attempted=done.items + accounted, jobs=[outcome.job for outcome in done.jobs],
            cohorts=self.cohorts if policy.rollout else [], checks=done.checks,
            clients=clients_with_recipients(clients, policy, {site.client for site in sites if site.client}),
            errors=done.errors, finished_at=datetime.now(UTC), dashboard=dashboard,
            mail_clients_when_broken=policy.mail_clients_when_broken, approval=approval,
            containments=self.breaks.containments,
        )
        usable = sum(1 for site in sites if site.status is SiteStatus.online)
        summary.accounts_for = [run.run_id for run in interrupted]
        summary.security_run = request.fixes_only
        summary.did_nothing = nothing_done(summary, plan, self.progress.synced.total, self.synced)
        summary.errors = self.notes + summary.errors + ([f"the night did nothing: {summary.did_nothing}"]
                                                        if summary.did_nothing else [])
        summary.looks = self.visual.finish(set(self.breaks.sites)) if self.visual else []
        if self.vulnerabilities is not None:
            self.vulnerabilities.mark(summary, policy.security)
        summary.work = None if request.dry_run else dashboard_work(
            self.sizer, syncs=self.progress.synced.done + done.resynced,
            update_items=sum(1 for item in done.items if item.applied_by_run is None), checks=len(done.checks),
            naive_syncs=self.naive_syncs + usable, naive_checks=usable if request.run_checks else 0)
        return summary

    def close(self, journal: JobJournal, interrupted: list[OpenRun], summary: Summary, dry_run: bool) -> None:
        """The killed runs get the summary they never wrote; this run leaves the journal finished."""
        if not dry_run:
            for run in interrupted:
                interrupted_summary(run, summary.items, summary.run_id, summary.dashboard or "",
                                    summary.started_at).write(run.run_dir)
                journal.accounted(run.run_id, self.run_id)
            journal.finish_run(self.run_id)
        journal.leave(self.run_id)
        journal.close()
