"""`update_fleet`, and the sentence every maintenance run follows:

sync and detect (per chunk, with the ignore lists alongside) -> known vulnerabilities -> policy (the security
lane) -> plan -> per cohort, in lanes of sites side by side: execute by type (translations, plugins, themes,
core) -> sensor on queued jobs -> checks -> re-sync -> reconcile; then open incidents -> summary -> the bad
versions remembered, the incidents across nights.

The rules between the steps are the engine's (`fleet.engine.night`); here is only their order, as Prefect runs it.
"""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from dashboard.block import DashboardConnection
from dashboard.client import DashboardClient
from fleet.engine.containment import held_items
from fleet.engine.detection import remember_rollback_reads
from fleet.engine.interrupted import account_interrupted, touched_sites
from fleet.engine.lanes import Lane, split_into_lanes, way_back_lane
from fleet.engine.memory import NightMemory
from fleet.engine.night import (
    CohortResult,
    Night,
    NightRequest,
    WindowDays,
    close_late_sites,
    collect_less,
    jobs_done,
    sites_to_sync,
    worked_on,
)
from fleet.engine.visual_watch import VisualWatch
from fleet.model.keys import ItemKey, item_key
from fleet.model.settings import PipelineSettings
from fleet.model.summary import ApprovalRecord, Item, ReportClient, Selection, Summary, UpdateType, run_suffix
from fleet.model.vocabulary import count
from fleet.pacing.fan_out import fan_out
from fleet.pacing.progress import heartbeat
from fleet.rules.approval import awaiting, gate_timeout
from fleet.rules.execution import APPLY_ORDER, CallResult, JobOutcome
from fleet.rules.incidents import fixed_releases
from fleet.rules.plan import DetectedUpdate, Plan, PlanCohort, PlanRequest, SiteRecord, fixes_only
from fleet.rules.policy import ContainMode, Policy, check_client_names
from fleet.rules.rollout import cohort_line
from fleet.rules.sync_failures import SyncFailures, apply_sync_failures, refused
from fleet.state.incidents import IncidentStore
from fleet.state.job_journal import JobJournal, OpenRun
from flows.approval import ask_for_approval
from flows.parameters import DryRun, FleetSelection, PlanMoment, PolicyFile, ReportDir, SavedDashboard
from flows.sync import dashboard_memory, open_dashboard, run_in_chunks, select_fleet
from orchestration.limits import night_lock
from orchestration.progress import NightArtifact
from orchestration.retries import FATAL_ERRORS
from tasks.checks import (
    check_sites_task,
    count_open_incidents_task,
    probe_before_updates_task,
    revive_refused_sites_task,
)
from tasks.contain import probe_and_contain_task, switch_on_fixed_releases_task
from tasks.detect import detect_updates_task
from tasks.execute import execute_updates_task
from tasks.holds import remember_bad_versions_task
from tasks.ignores import load_ignores_task
from tasks.incidents import review_incidents_task
from tasks.interrupted import account_interrupted_runs_task, wait_for_interrupted_runs_task
from tasks.page_checks import worker_capture
from tasks.plan import finalise_plan_task
from tasks.policy import apply_policy_task
from tasks.reconcile import reconcile_task
from tasks.sensor import wait_for_batch_job_task
from tasks.summarise import write_summary_task
from tasks.sync import read_child_slots_task, sync_sites_task
from tasks.visual import take_baselines_task
from tasks.vulnerabilities import review_vulnerabilities_task


def run_identity(started: datetime) -> str:
    """A run id that sorts by time and is unique per flow run."""
    suffix = run_suffix(flow_run.get_id() or uuid4().hex)
    return f"{started:%Y%m%d-%H%M%S}-{suffix}"


async def survey_fleet(
    client: DashboardClient, sites: list[SiteRecord], settings: PipelineSettings, sync: bool, night: Night,
    rollbacks: frozenset[int] | None = None,
) -> tuple[list[SiteRecord], list[DetectedUpdate]]:
    """Sync each chunk of sites and list its updates as soon as that chunk is synced (without `sync`: list only),
    with MainWP's memory of rolled-back versions read for `rollbacks` (None: every site).

    The sites come back with their status after the sync; the list covers every selected site, usable or not,
    so that the plan can say why an item on an unusable site is skipped.
    """
    now = datetime.now(UTC)

    async def chunk_step(chunk: list[SiteRecord], label: str) -> tuple[SyncFailures, set[int], list[DetectedUpdate]]:
        usable = sites_to_sync(chunk, settings, now)
        failures = (await sync_sites_task.with_options(task_run_name=f"sync-{label}")(
            client, quote(usable), settings, sizer=quote(night.sizer), progress=quote(night.progress))
            if sync and usable else {})
        revived: set[int] = set()
        if refused(failures):
            failures, revived = await revive_refused_sites_task(client, quote(usable), quote(failures), settings,
                                                                quote(night.sizer))
        pending = await detect_updates_task.with_options(task_run_name=f"detect-{label}")(
            client, quote([site.id for site in chunk]), settings.concurrency,
            rollbacks=True if rollbacks is None else quote(rollbacks))
        return failures, revived, pending

    parts = await run_in_chunks(chunk_step, sites, settings)
    failures = {site_id: failure for part, _, _ in parts for site_id, failure in part.items()}
    night.synced = night.progress.synced.total - len(failures)  # a failure is only ever of a site it synced
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
    for job_id in jobs_done(list(jobs)):
        journal.finish(job_id)
    journal.close()
    return list(jobs)


async def run_lane(
    client: DashboardClient, lane: Lane, night: Night, settings: PipelineSettings, run_checks: bool
) -> CohortResult:
    """One lane through the sentence: each type in the safe order (its jobs waited out, then the sites probed so
    that a break is tied to one step and stopped there), then checks and a re-sync of the sites something was
    applied to, a fresh list and reconcile."""
    result = CohortResult()
    calls: list[CallResult] = []
    held: dict[ItemKey, str] = {}
    gated: set[ItemKey] = set()  # the approval gate accounts for these
    before = (await probe_before_updates_task.with_options(task_run_name=f"probe-before-{lane.label}")(
        quote(lane.sites), settings) if run_checks else {})
    if before and night.visual is not None:
        await take_baselines_task.with_options(task_run_name=f"visual-baselines-{lane.label}")(
            quote(night.visual), quote(lane.sites), quote(lane.items), quote(before), settings)
    for type_ in APPLY_ORDER:
        step = night.breaks.withhold(lane.items_of(type_), lane.untouchable.get(type_, {}))
        held |= step.held
        gated |= step.gated
        if not step.sent:
            continue
        type_calls = await execute_updates_task.with_options(task_run_name=f"execute-{type_}-{lane.label}")(
            client, quote(step.sent), type_, quote(lane.sites), night.run_id, settings,
            untouchable=quote(step.untouchable), sizer=quote(night.sizer), progress=quote(night.progress))
        calls += type_calls
        jobs = await wait_for_update_jobs(client, type_calls, settings)
        result.jobs += jobs
        if lane.switch_on and type_ is UpdateType.plugin:  # the way back: the fixed releases go live, then probed
            await switch_on_fixed_releases_task(client, quote(step.sent), quote(type_calls), quote(jobs),
                                                 quote(night.breaks), quote(lane.sites), night.run_id,
                                                 settings.report_dir)
        if before:  # a site the step broke is contained (its culprit found) and gets nothing more tonight
            await probe_and_contain_task.with_options(task_run_name=f"probe-after-{type_}-{lane.label}")(
                client, quote(before), quote(lane.sites), type_, quote(step.sent), quote(night.breaks), night.policy,
                night.run_id, settings, watch=quote(night.visual))
    touched = worked_on(calls)
    resync = [site for site in lane.sites if site.id in touched]
    if run_checks:
        checked = lane.sites if settings.check_all_sites else resync
        if checked:
            result.checks = await check_sites_task.with_options(task_run_name=f"check-{lane.label}")(
                client, quote(checked), settings, before=quote(before), sizer=quote(night.sizer))
        night.progress.add(night.progress.checked, len(checked))
    label = f"after-updates-{lane.label}"
    failures = (await sync_sites_task.with_options(task_run_name=f"sync-{label}")(
        client, quote(resync), settings, sizer=quote(night.sizer)) if resync else {})
    result.resynced = len(resync)
    after = await detect_updates_task.with_options(task_run_name=f"detect-{label}")(
        client, quote(lane.site_ids), settings.concurrency)
    if night.visual is not None:  # what the next night compares its list with, to carry the pages' shots
        night.visual.lane_settled(lane.site_ids, after)
    not_sent = held.keys() | gated
    sent = [item for item in lane.items if item_key(item) not in not_sent]
    result.items = await reconcile_task.with_options(task_run_name=f"reconcile-{lane.label}")(
        quote(sent), quote(lane.sites), quote(calls), quote(result.jobs), quote(failures), quote(after))
    result.items += held_items(lane.items, lane.sites, held)
    return result


async def run_cohort(
    client: DashboardClient, plan: Plan, cohort: PlanCohort, settings: PipelineSettings, run_checks: bool,
    night: Night,
) -> CohortResult:
    """The cohort's lanes side by side; a lane whose step failed after its retries accounts for its items."""

    async def lane_step(lane: Lane) -> CohortResult:
        lane, deferred = close_late_sites(lane, datetime.now(UTC))
        if not lane.sites:
            return deferred
        try:
            result = await run_lane(client, lane, night, settings, run_checks)
        except FATAL_ERRORS:
            raise
        except Exception as error:
            return CohortResult.lane_failed(cohort.name, lane, error)
        result.add(deferred)
        return result

    lanes = split_into_lanes(plan, cohort, settings.chunk_size)
    result = CohortResult()
    for lane_result in await fan_out(lanes, lane_step, settings.concurrency):  # the client bounds the requests
        result.add(lane_result)
    if run_checks and result.checks:
        checked = [site for lane in lanes for site in lane.sites if site.id in result.checks]
        result.checks = await count_open_incidents_task(client, quote(checked), quote(result.checks), settings)
    return result


async def take_the_way_back(
    client: DashboardClient, plan: Plan, settings: PipelineSettings, request: NightRequest, night: Night
) -> Plan:
    """Before the cohorts, each newer release of a culprit an open incident left deactivated goes to that site
    alone, is switched on and probed (and looked at): healthy, the night's review closes the incident; broken, it
    is contained again, held, and goes nowhere else tonight. Returns the plan left for the cohorts."""
    if request.dry_run or not request.run_checks or night.policy.contain is not ContainMode.deactivate:
        return plan
    incidents = IncidentStore(settings.state_path).open_incidents(client.settings.base_url)
    fixed = [item for item in fixed_releases(plan.items, incidents) if night.policy.may_deactivate(item.slug)]
    if not fixed:
        return plan
    get_run_logger().info("the way back: %s of deactivated culprits, each on its site alone",
                          count(len(fixed), "fixed release"))
    night.done.add(await run_lane(client, way_back_lane(plan, fixed), night, settings, request.run_checks))
    taken = {item_key(item) for item in fixed}
    return plan.model_copy(update={"items": [item for item in plan.items
                                             if item_key(item) not in taken]})


async def run_cohorts(
    client: DashboardClient, plan: Plan, settings: PipelineSettings, request: NightRequest, night: Night
) -> None:
    """The staged rollout: cohort after cohort, until one fails more often than its budget allows."""
    for position, cohort in enumerate([] if request.dry_run else plan.cohorts):
        result = await run_cohort(client, plan, cohort, settings, request.run_checks, night)
        verdict = night.judge(plan, position, result)
        get_run_logger().info("%s", cohort_line(verdict))
        if verdict.status == "stopped":
            break


async def approval_gate(
    client: DashboardClient, plan: Plan, policy: Policy, settings: PipelineSettings, request: NightRequest,
    night: Night,
) -> ApprovalRecord | None:
    """Once the unattended items are done, a person decides about the rest; the approved ones run now."""
    waiting = [] if request.dry_run else awaiting(plan)
    if not waiting:
        return None
    night.breaks.tell_reviews(waiting)
    answer, approval = await ask_for_approval(plan, waiting, gate_timeout(policy.approval, plan, waiting),
                                              client.settings.base_url, settings.report_dir / "alerts")
    approved = night.approved(plan, answer)
    if approved is not None:
        async with heartbeat(get_run_logger(), night.progress.describe, settings.progress_seconds):
            night.done.add(await run_cohort(client, approved, approved.cohorts[0], settings, request.run_checks,
                                            night))
    return approval


async def reach_fleet(
    client: DashboardClient, request: NightRequest, night: Night, settings: PipelineSettings, moment: datetime
) -> tuple[list[SiteRecord], list[ReportClient], WindowDays]:
    """The selected sites placed in their windows as at `moment`, the dashboard's clients (the policy's names
    checked against them), and the child sites' slots read before any write."""
    sites, clients = await select_fleet(client, request.selection)
    check_client_names(night.policy, [known.name for known in clients], request.policy_path(settings))
    window_days = WindowDays.of(night.policy, request, settings, client.settings.base_url)
    sites = window_days.place(sites, night.policy, moment)
    night.sizer.slots = await read_child_slots_task(client, quote(sites), settings)
    return sites, clients, window_days


async def plan_night(
    client: DashboardClient, sites: list[SiteRecord], request: NightRequest, night: Night, memory: NightMemory,
    interrupted: list[OpenRun], settings: PipelineSettings, started: datetime, moment: datetime,
) -> tuple[list[SiteRecord], Plan, list[Item]]:
    """Survey (the ignore lists alongside), account for the killed runs, review the known vulnerabilities, decide
    by the policy and plan the rollout; returns the sites as synced, the plan and the killed runs' items."""
    # a sync is a write request: a dry run plans from the dashboard's last sync
    (sites, pending), ignored = await asyncio.gather(
        survey_fleet(client, sites, settings, sync=not request.dry_run, night=night, rollbacks=memory.rollback_sites),
        load_ignores_task(client, quote([site.id for site in sites])),
    )
    accounted = await account_for_interrupted_runs(client, interrupted, sites, pending, night, settings,
                                                   judge=request.run_checks)
    night.vulnerabilities = await review_vulnerabilities_task(client, quote(sites), quote(pending), settings,
                                                              request.dry_run)
    plan = await apply_policy_task(quote(PlanRequest(
        run_id=night.run_id, created_at=started, sites=sites, pending=pending, ignored=ignored, policy=night.policy,
        selection=request.selection, dry_run=request.dry_run, planned_for=request.at and moment,
        vulnerabilities=night.vulnerabilities.items)), settings)
    del pending, ignored  # the plan holds them now
    if request.fixes_only:
        plan = fixes_only(plan, night.policy.security)
    plan = await finalise_plan_task(quote(plan), night.policy.rollout, settings.report_dir / night.run_id)
    if night.visual is not None:
        night.visual.remember_in(memory.visual_baselines(), plan.items)
    return sites, plan, accounted


async def take_over_interrupted_runs(
    client: DashboardClient, interrupted: list[OpenRun], night: Night, settings: PipelineSettings
) -> None:
    """The killed runs this one accounts for: told as crashed, their sites left to go quiet. A wait that fails is
    said, and the night goes on with its own work (a killed run must never stop the nights after it)."""
    logger = get_run_logger()
    for note in night.unsaid_notes():  # the runs closed with their items unknown, given up
        logger.warning(note)
    try:
        await wait_for_interrupted_runs_task(client, quote(interrupted), quote(night.sizer), settings, night.run_id)
    except FATAL_ERRORS:
        raise
    except Exception as error:  # noqa: BLE001 - said, and the night does its own work
        logger.warning("the sites %s touched could not be waited for: %s", count(len(interrupted), "interrupted run"),
                       error)


async def account_for_interrupted_runs(
    client: DashboardClient, interrupted: list[OpenRun], sites: list[SiteRecord], pending: list[DetectedUpdate],
    night: Night, settings: PipelineSettings, judge: bool,
) -> list[Item]:
    """The items the killed runs applied (with `judge`, the sites they broke contained and held tonight, before
    the night's first write); when the step fails after its retries, every one of them is `unknown`, saying why,
    and the night does its own work."""
    if not interrupted:
        return []
    try:
        accounting = await account_interrupted_runs_task(
            client, quote(interrupted), quote(sites), quote(pending), quote(night.sizer), settings,
            breaks=quote(night.breaks) if judge else None, policy=night.policy, run_id=night.run_id)
    except FATAL_ERRORS:
        raise
    except Exception as error:  # noqa: BLE001 - every item still gets an outcome
        why = f"the accounting failed tonight: {type(error).__name__}: {error}"
        get_run_logger().warning("%s (%s): %s; their items are unknown", count(len(interrupted), "interrupted run"),
                                 ", ".join(run.run_id for run in interrupted), why)
        return account_interrupted(interrupted, {}, [], dict.fromkeys(touched_sites(interrupted), why))
    night.done.add(CohortResult(checks=accounting.checks))
    return accounting.items


async def account_for_night(
    client: DashboardClient, plan: Plan, request: NightRequest, night: Night, settings: PipelineSettings, *,
    sites: list[SiteRecord], clients: list[ReportClient], accounted: list[Item], interrupted: list[OpenRun],
    approval: ApprovalRecord | None,
) -> Summary:
    """The summary, then the bad versions remembered and the incidents across nights."""
    summary = night.summary(request, plan, accounted=accounted, sites=sites, clients=clients, policy=night.policy,
                            dashboard=client.settings.base_url, approval=approval, interrupted=interrupted)
    summary.holds = await remember_bad_versions_task(quote(summary), night.policy.hold_after_failures, settings,
                                                     quiet_days=night.policy.hold_quiet_days)
    summary.incidents = await review_incidents_task(client, quote(summary), quote(sites), settings,
                                                    quote(night.sizer), look=request.run_checks)
    return summary


async def maintain_fleet(request: NightRequest, dashboard: DashboardConnection | None = None,
                         memory: NightMemory | None = None) -> Path:
    """The whole sentence; returns the run directory summary.json was written to (the report reads it there).
    `memory`: the dashboard's, when the caller opened it already (a security run, to decide whether there is work)."""
    started = datetime.now(UTC)
    collect_less()
    moment = request.moment(started)  # `at`: dry runs only
    settings, policy = request.settings_and_policy()  # a bad policy fails here, before any request
    async with await open_dashboard(dashboard, settings) as client:
        # the one place the memory across runs is opened
        memory = memory or NightMemory(settings, client.settings.base_url)
        settings = memory.settings
        night = Night(run_identity(started), settings.call_sizer(), policy=policy, notes=memory.notes)
        run_dir = settings.report_dir / night.run_id
        night.visual = VisualWatch.for_night(policy.visual if request.run_checks else None, run_dir, settings,
                                             capture=worker_capture(policy, run_dir, settings))
        logger = get_run_logger()
        for note in night.unsaid_notes():
            logger.warning(note)
        artifact = NightArtifact(night.progress, every=min(settings.progress_seconds, 10.0))
        async with night.visual or nullcontext():
            sites, clients, window_days = await reach_fleet(client, request, night, settings, moment)
            interrupted = night.open(memory.journal, run_dir, request.dry_run, flow_run.get_id(), memory.dashboard)
            if interrupted:
                await take_over_interrupted_runs(client, interrupted, night, settings)
            night.expect(sites, settings, started, request.dry_run)
            await artifact.open()
            try:
                async with heartbeat(logger, night.progress.describe, settings.progress_seconds):
                    sites, plan, accounted = await plan_night(client, sites, request, night, memory, interrupted,
                                                              settings, started, moment)
                    logger.info("%s", night.planned(plan, request))
                    await run_cohorts(client, await take_the_way_back(client, plan, settings, request, night),
                                      settings, request, night)
                approval = await approval_gate(client, plan, policy, settings, request, night)
                window_days.record(night.run_id)
                summary = await account_for_night(client, plan, request, night, settings, accounted=accounted,
                                                  sites=sites, clients=clients, approval=approval,
                                                  interrupted=interrupted)
            except BaseException:
                memory.journal.leave(night.run_id)  # the next run accounts for what this one applied
                raise
            finally:
                await artifact.close()
    if not request.dry_run:
        remember_rollback_reads(summary, plan, memory.rollback_sites, memory.rollback_reads)
    await write_summary_task(quote(summary), run_dir)
    night.close(memory.journal, interrupted, summary, request.dry_run)
    return run_dir


@flow(name="update-fleet", log_prints=False)
async def update_fleet(
    selection: FleetSelection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dry_run: DryRun = False,
    policy_file: PolicyFile = "",
    report_dir: ReportDir = "",
    dashboard: SavedDashboard = None,
    at: PlanMoment = None,
) -> str:
    """Apply the policy's updates to the selected sites now (no health checks, no report); returns summary.json."""
    request = NightRequest(selection=selection, dry_run=dry_run, policy_file=policy_file, report_dir=report_dir,
                           run_checks=False, at=at)
    settings, _ = request.settings_and_policy()
    async with night_lock(dashboard_memory(dashboard, settings), "update", settings.night_lock_wait_seconds) if (
            dashboard is None) else nullcontext():  # as the nightly
        return str(await maintain_fleet(request, dashboard) / "summary.json")
