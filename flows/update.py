"""`update_fleet`, and the sentence every maintenance run follows:

sync and detect (per chunk, with the ignore lists alongside) -> policy -> plan -> per cohort, in lanes of sites
side by side: execute by type (translations, plugins, themes, core) -> sensor on queued jobs -> checks ->
re-sync -> reconcile; then open incidents -> summary.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from dashboard.block import DashboardConnection
from dashboard.client import DashboardClient
from fleet.engine.lanes import Lane, split_into_lanes, without_sites
from fleet.engine.run_summary import build_summary, clients_with_recipients, dashboard_work, interrupted_summary
from fleet.model.settings import PipelineSettings
from fleet.model.summary import ApprovalRecord, Cohort, Item, Outcome, Selection, SiteCheck
from fleet.pacing.call_sizing import CallSizer
from fleet.pacing.fan_out import fan_out
from fleet.pacing.progress import NightProgress, heartbeat
from fleet.rules.approval import awaiting, gate_timeout, settle
from fleet.rules.execution import APPLY_ORDER, CallResult, JobOutcome
from fleet.rules.plan import Decision, PendingUpdate, Plan, PlanCohort, SiteRecord, SiteStatus
from fleet.rules.policy import Policy, check_recipients, load_policy
from fleet.rules.reconcile import summary_item
from fleet.rules.rollout import failed_sites, judge_cohort, stop_cohorts
from fleet.rules.windows import place_in_windows
from fleet.state.job_journal import JobJournal
from fleet.state.maintenance_log import MaintenanceLog
from flows.approval import ask_for_approval
from flows.sync import open_dashboard, run_in_chunks, select_fleet
from tasks.checks import (
    check_sites_task,
    count_open_incidents_task,
    known_offline,
    probe_before_updates_task,
    revive_known_offline_task,
)
from tasks.detect import apply_sync_failures, detect_updates_task
from tasks.execute import execute_updates_task
from tasks.holds import remember_bad_versions_task
from tasks.ignores import load_ignores_task
from tasks.interrupted import account_interrupted_runs_task, wait_for_interrupted_runs_task
from tasks.plan import finalise_plan_task
from tasks.policy import apply_policy_task
from tasks.progress import NightArtifact
from tasks.reconcile import reconcile_task
from tasks.retries import FATAL_ERRORS
from tasks.sensor import wait_for_batch_job_task
from tasks.summarise import write_summary_task
from tasks.sync import sync_sites_task


@dataclass
class CohortResult:
    items: list[Item] = field(default_factory=list)
    jobs: list[JobOutcome] = field(default_factory=list)
    checks: dict[int, SiteCheck] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    resynced: int = 0

    def add(self, other: CohortResult) -> None:
        self.items += other.items
        self.jobs += other.jobs
        self.checks |= other.checks
        self.errors += other.errors
        self.resynced += other.resynced


@dataclass
class Night:
    """What every step of one run shares: its id, the call sizer that learns from every answer, the progress."""

    run_id: str
    sizer: CallSizer
    progress: NightProgress = field(default_factory=NightProgress)


def run_identity(started: datetime) -> str:
    """A run id that sorts by time and is unique per flow run."""
    suffix = (flow_run.get_id() or uuid4().hex)[:8]
    return f"{started:%Y%m%d-%H%M%S}-{suffix}"


def pipeline_settings(report_dir: str) -> PipelineSettings:
    return PipelineSettings(**({"report_dir": Path(report_dir)} if report_dir else {}))


def resolve_policy(policy_file: str, settings: PipelineSettings) -> Policy:
    path = Path(policy_file) if policy_file else settings.policy_file
    return load_policy(path) if path else Policy()


def unverified(lane: Lane, reason: str) -> list[Item]:
    sites = {site.id: site for site in lane.sites}
    return [summary_item(item, sites[item.site_id], Outcome.unknown, reason) for item in lane.items]


def sites_to_sync(sites: list[SiteRecord], settings: PipelineSettings, now: datetime) -> list[SiteRecord]:
    """The usable sites, less those deferred by their window and those the dashboard synced within
    `FLEET_FRESH_SYNC_HOURS`."""
    return [site for site in sites if site.status is SiteStatus.online and site.deferral is None
            and not site.synced_within(settings.fresh_sync_hours, now)]


async def survey_fleet(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings, sync: bool, night: Night
) -> tuple[list[SiteRecord], list[PendingUpdate]]:
    """Sync each chunk of sites and list its updates as soon as that chunk is synced (without `sync`: list only).

    The sites come back with their status after the sync; the list covers every selected site, usable or not,
    so that the plan can say why an item on an unusable site is skipped.
    """
    now = datetime.now(UTC)

    async def chunk_step(
        chunk: list[SiteRecord], label: str
    ) -> tuple[dict[int, tuple[str, str]], set[int], list[PendingUpdate]]:
        usable = sites_to_sync(chunk, settings, now)
        failures = (await sync_sites_task(client, quote(usable), settings, label=label, sizer=quote(night.sizer),
                                          progress=quote(night.progress)) if sync and usable else {})
        revived: set[int] = set()
        if known_offline(failures):
            failures, revived = await revive_known_offline_task(client, quote(usable), quote(failures), settings,
                                                                quote(night.sizer))
        ids = [site.id for site in chunk]
        pending = await detect_updates_task(client, quote(ids), settings.concurrency, label=label)
        return failures, revived, pending

    parts = await run_in_chunks(chunk_step, sites, settings)
    failures = {site_id: failure for part, _, _ in parts for site_id, failure in part.items()}
    revived = {site_id for _, part, _ in parts for site_id in part}
    sites = [site.model_copy(update={"revived": True}) if site.id in revived else site for site in sites]
    return apply_sync_failures(sites, failures), [update for _, _, pending in parts for update in pending]


async def wait_for_update_jobs(
    client: DashboardClient, calls: list[CallResult], settings: PipelineSettings
) -> list[JobOutcome]:
    """The sensor on every job the calls queued (or re-used); a finished or vanished job leaves the journal."""
    queued = {call.job_id: call.call.site_ids for call in calls if call.job_id}
    jobs = await asyncio.gather(*(
        wait_for_batch_job_task(client, job_id, "update", quote(sites), settings) for job_id, sites in queued.items()
    ))
    journal = JobJournal(settings.state_path)
    for outcome in jobs:
        if outcome.finished or outcome.job.status in ("expired", "not_found"):
            journal.finish(outcome.job.id)
    journal.close()
    return list(jobs)


def worked_on(calls: list[CallResult]) -> set[int]:
    """Sites where something may have been applied: a call that queued a job, lost its answer, or reported an
    item done. A site whose calls all failed outright is not re-synced: its last list still holds."""
    sites = set()
    for call in calls:
        if call.job_id or call.lost or call.call.per_site:
            sites.update(call.call.site_ids)
        sites.update(report.site_id for report in call.reports if report.ok)
    return sites


async def run_lane(
    client: DashboardClient, lane: Lane, night: Night, settings: PipelineSettings, run_checks: bool
) -> CohortResult:
    """One lane through the sentence: each type in the safe order (its jobs waited out before the next type),
    then checks and a re-sync of the sites something was applied to, a fresh list and reconcile."""
    result = CohortResult()
    calls: list[CallResult] = []
    before = await probe_before_updates_task(quote(lane.sites), settings, label=lane.label) if run_checks else {}
    for type_ in APPLY_ORDER:
        typed = lane.items_of(type_)
        if typed:
            type_calls = await execute_updates_task(client, quote(typed), type_, quote(lane.sites), night.run_id,
                                                    settings, untouchable=quote(lane.untouchable.get(type_, {})),
                                                    label=lane.label, sizer=quote(night.sizer),
                                                    progress=quote(night.progress))
            calls += type_calls
            result.jobs += await wait_for_update_jobs(client, type_calls, settings)
    touched = worked_on(calls)
    resync = [site for site in lane.sites if site.id in touched]
    if run_checks:
        checked = lane.sites if settings.check_all_sites else resync
        if checked:
            result.checks = await check_sites_task(client, quote(checked), settings, label=lane.label,
                                                   before=quote(before), sizer=quote(night.sizer))
        night.progress.add(night.progress.checked, len(checked))
    failures = (await sync_sites_task(client, quote(resync), settings, label=f"after-updates-{lane.label}",
                                      sizer=quote(night.sizer)) if resync else {})
    result.resynced = len(resync)
    after = await detect_updates_task(client, quote(lane.site_ids), settings.concurrency,
                                      label=f"after-updates-{lane.label}")
    result.items = await reconcile_task(quote(lane.items), quote(lane.sites), quote(calls), quote(result.jobs),
                                        quote(failures), quote(after), label=lane.label)
    return result


async def run_cohort(
    client: DashboardClient, plan: Plan, cohort: PlanCohort, settings: PipelineSettings, run_checks: bool,
    night: Night,
) -> CohortResult:
    """The cohort's lanes side by side; a lane whose step failed after its retries accounts for its items."""

    async def lane_step(lane: Lane) -> CohortResult:
        now = datetime.now(UTC)  # a window that closed while earlier lanes ran: no new calls for its sites
        late = [site for site in lane.sites if site.window_closes_at is not None and site.window_closes_at <= now]
        if late:
            lane, closed = without_sites(lane, {site.id for site in late})
            reason = "deferred: its maintenance window closed before it was reached"
            sites = {site.id: site for site in late}
            deferred = CohortResult(items=[summary_item(item, sites[item.site_id], Outcome.deferred, reason)
                                           for item in closed])
            if not lane.sites:
                return deferred
        try:
            result = await run_lane(client, lane, night, settings, run_checks)
            if late:
                result.add(deferred)
            return result
        except FATAL_ERRORS:
            raise
        except Exception as error:
            return CohortResult(items=unverified(lane, f"the run could not verify it: {error}"),
                                errors=[f"cohort {cohort.name!r}, lane {lane.label}: a step failed: {error}"])

    lanes = split_into_lanes(plan, cohort, settings.chunk_size)
    result = CohortResult()
    for lane_result in await fan_out(lanes, lane_step, settings.concurrency):  # the client bounds the requests
        result.add(lane_result)
    if run_checks and result.checks:
        checked = [site for lane in lanes for site in lane.sites if site.id in result.checks]
        result.checks = await count_open_incidents_task(client, quote(checked), quote(result.checks), settings)
    return result


async def maintain_fleet(
    *,
    selection: Selection,
    dry_run: bool,
    policy_file: str,
    report_dir: str,
    dashboard: DashboardConnection | None,
    run_checks: bool,
    at: datetime | None = None,
) -> Path:
    """The whole sentence; returns the run directory summary.json was written to (the report reads it there).

    `at` (dry runs only) plans as if it were that moment: windows, blackouts, holds and ages as then."""
    if at is not None and not dry_run:
        raise ValueError("`at` rehearses a plan: it is refused for a run that writes (use it with a dry run)")
    settings = pipeline_settings(report_dir)
    policy = resolve_policy(policy_file, settings)  # a bad policy fails here, before any request
    if policy.check_all_sites:
        settings = settings.model_copy(update={"check_all_sites": True})
    started = datetime.now(UTC)
    moment = (at.replace(tzinfo=UTC) if at.tzinfo is None else at) if at is not None else started
    night = Night(run_identity(started), settings.call_sizer())
    run_dir = settings.report_dir / night.run_id
    journal = JobJournal(settings.state_path)
    logger = get_run_logger()
    artifact = NightArtifact(night.progress, every=min(settings.progress_seconds, 10.0))
    async with await open_dashboard(dashboard, settings) as client:
        sites, clients = await select_fleet(client, selection)
        errors: list[str] = []
        check_recipients(policy, [known.name for known in clients])
        maintained = MaintenanceLog(settings.state_path)
        once_a_day = bool(policy.windows) and not dry_run  # hourly runs maintain a site once per window day
        sites, window_days = place_in_windows(sites, policy.windows, policy.blackouts, moment,
                                              maintained.last_days(client.settings.base_url) if once_a_day else None)
        interrupted = [] if dry_run else journal.open_runs(night.run_id)
        if not dry_run:
            journal.start_run(night.run_id, run_dir)
        if interrupted:
            await wait_for_interrupted_runs_task(client, quote(interrupted), quote(night.sizer), settings)
        night.progress.synced.total = 0 if dry_run else len(sites_to_sync(sites, settings, started))
        naive_syncs = sum(1 for site in sites if site.status is SiteStatus.online)  # the naive chain syncs all
        await artifact.open()
        try:
            async with heartbeat(logger, night.progress.describe, settings.progress_seconds):
                # a sync is a write request: a dry run plans from the dashboard's last sync
                (sites, pending), ignored = await asyncio.gather(
                    survey_fleet(client, sites, settings, sync=not dry_run, night=night),
                    load_ignores_task(client, quote([site.id for site in sites])),
                )
                accounted = (await account_interrupted_runs_task(client, quote(interrupted), quote(sites),
                                                                 quote(pending), quote(night.sizer), settings)
                             if interrupted else [])
                plan = await apply_policy_task(run_id=night.run_id, created_at=started, sites=quote(sites),
                                               pending=quote(pending), ignored=quote(ignored), policy=policy,
                                               selection=selection, dry_run=dry_run, settings=settings,
                                               planned_for=at and moment)
                del pending, ignored  # the plan holds them now
                plan = await finalise_plan_task(quote(plan), policy.rollout, run_dir)
                decided = Counter(item.decision.value for item in plan.items)
                logger.info("plan: %d site(s), %d item(s): %s", len(sites), len(plan.items),
                            ", ".join(f"{count} {decision}" for decision, count in decided.most_common()))
                night.progress.applied.total = 0 if dry_run else decided.get(Decision.apply.value, 0)
                if run_checks and not dry_run:  # at most: only the sites something was applied to are checked
                    night.progress.checked.total = len({item.site_id for item in plan.items
                                                        if item.decision is Decision.apply})
                attempted: list[Item] = []
                jobs: list[JobOutcome] = []
                checks: dict[int, SiteCheck] = {}
                cohorts: list[Cohort] = []
                resynced = 0
                for position, cohort in enumerate([] if dry_run else plan.cohorts):
                    result = await run_cohort(client, plan, cohort, settings, run_checks, night)
                    errors += result.errors
                    attempted += result.items
                    jobs += result.jobs
                    checks |= result.checks
                    resynced += result.resynced
                    verdict = judge_cohort(cohort, len(failed_sites(result.items, result.checks)))
                    cohorts.append(verdict)
                    logger.info("cohort %r: %d site(s), %d failed, %s", cohort.name, verdict.sites, verdict.failures,
                                verdict.status)
                    if verdict.status == "stopped":
                        cohorts += stop_cohorts(plan, plan.cohorts[position + 1 :], verdict)
                        break
            approval: ApprovalRecord | None = None
            waiting = [] if dry_run else awaiting(plan)
            if waiting:  # the unattended items are done: now a person decides about the rest
                answer, approval = await ask_for_approval(plan, waiting, gate_timeout(policy.approval, plan, waiting),
                                                          client.settings.base_url, settings.report_dir / "alerts")
                approved = settle(plan, answer)
                if approved is not None:
                    night.progress.applied.total += len(approved.items)
                    async with heartbeat(logger, night.progress.describe, settings.progress_seconds):
                        result = await run_cohort(client, approved, approved.cohorts[0], settings, run_checks,
                                                  night)
                    errors += result.errors
                    attempted += result.items
                    jobs += result.jobs
                    checks |= result.checks
                    resynced += result.resynced
            if once_a_day:
                maintained.record(client.settings.base_url, window_days, night.run_id)
        except BaseException:
            journal.leave(night.run_id)  # the next run accounts for what this one applied
            raise
        finally:
            await artifact.close()
    site_clients = {site.client for site in sites if site.client}
    summary = build_summary(
        plan=plan,
        attempted=attempted + accounted,
        jobs=[outcome.job for outcome in jobs],
        cohorts=cohorts if policy.rollout else [],
        checks=checks,
        clients=clients_with_recipients(clients, policy, site_clients),
        errors=errors,
        finished_at=datetime.now(UTC),
        dashboard=client.settings.base_url,
        mail_clients_when_broken=policy.mail_clients_when_broken,
        approval=approval,
    )
    usable = sum(1 for site in sites if site.status is SiteStatus.online)
    summary.accounts_for = [run.run_id for run in interrupted]
    summary.work = None if dry_run else dashboard_work(
        night.sizer, syncs=night.progress.synced.done + resynced,
        update_items=sum(1 for item in attempted if item.applied_by_run is None), checks=len(checks),
        naive_syncs=naive_syncs + usable, naive_checks=usable if run_checks else 0)
    summary.holds = await remember_bad_versions_task(quote(summary), policy.hold_after_failures, settings)
    await write_summary_task(quote(summary), run_dir)
    if not dry_run:
        for run in interrupted:
            interrupted_summary(run, summary).write(run.run_dir)
            journal.accounted(run.run_id, night.run_id)
        journal.finish_run(night.run_id)
    journal.leave(night.run_id)
    journal.close()
    return run_dir


@flow(name="update-fleet", log_prints=False)
async def update_fleet(
    selection: Selection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dry_run: bool = False,
    policy_file: str = "",
    report_dir: str = "",
    dashboard: DashboardConnection | None = None,
    at: datetime | None = None,
) -> str:
    """Apply the policy's updates to the selected sites now (no health checks, no report); returns summary.json.

    Args:
        selection: Which sites (ids or domains), tags, clients and update types; empty lists mean all.
        dry_run: Plan only: read the dashboard, write the plan and the summary, send no write request.
        policy_file: Policy file (YAML or TOML); empty means FLEET_POLICY_FILE, or apply everything.
        report_dir: Where the run directory goes; empty means FLEET_REPORT_DIR.
        dashboard: A saved Dashboard Connection block; none chosen means the FLEET_* environment.
        at: Dry runs only: plan as if it were this moment (rehearse windows and blackouts); empty means now.
    """
    run_dir = await maintain_fleet(selection=selection, dry_run=dry_run, policy_file=policy_file,
                                   report_dir=report_dir, dashboard=dashboard, run_checks=False, at=at)
    return str(run_dir / "summary.json")
