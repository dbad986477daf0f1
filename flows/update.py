"""`update_fleet`, and the sentence every maintenance run follows:

sync -> detect -> ignore lists -> policy -> plan -> per cohort: execute by type (translations, plugins, themes,
core) -> sensor on queued jobs -> checks -> reconcile -> summary.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from dashboard.client import DashboardClient
from fleet.execution import APPLY_ORDER, CallResult, JobOutcome
from fleet.job_journal import JobJournal
from fleet.plan import Decision, Plan, PlanCohort, PlanItem, SiteRecord
from fleet.policy import Policy, load_policy
from fleet.reconcile import summary_item
from fleet.rollout import failed_sites, judge_cohort, stop_cohorts
from fleet.run_summary import build_summary, clients_with_recipients
from fleet.settings import PipelineSettings
from fleet.summary import Cohort, Item, Outcome, Selection, SiteCheck, Summary
from flows.sync import open_dashboard, run_in_chunks, select_fleet, sync_selected
from tasks.checks import check_sites_task
from tasks.detect import detect_updates_task
from tasks.execute import execute_updates_task
from tasks.ignores import load_ignores_task
from tasks.plan import finalise_plan_task
from tasks.policy import apply_policy_task
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


def run_identity(started: datetime) -> str:
    """A run id that sorts by time and is unique per flow run."""
    suffix = (flow_run.get_id() or uuid4().hex)[:8]
    return f"{started:%Y%m%d-%H%M%S}-{suffix}"


def pipeline_settings(report_dir: str | None) -> PipelineSettings:
    return PipelineSettings(**({"report_dir": Path(report_dir)} if report_dir else {}))


def resolve_policy(policy_file: str | None, settings: PipelineSettings) -> Policy:
    path = Path(policy_file) if policy_file else settings.policy_file
    return load_policy(path) if path else Policy()


def unverified(plan: Plan, cohort: PlanCohort, reason: str) -> list[Item]:
    sites = {site.id: site for site in plan.sites}
    return [summary_item(item, sites[item.site_id], Outcome.unknown, reason) for item in plan.to_apply(cohort.site_ids)]


async def update_type(
    client: DashboardClient, plan: Plan, items: list[PlanItem], type_, settings: PipelineSettings
) -> tuple[list[CallResult], list[JobOutcome]]:
    """Execute one update type over chunks of sites, then wait on every job it queued (or re-used)."""
    typed = [item for item in items if item.type is type_]
    site_ids = sorted({item.site_id for item in typed})
    by_site = {site.id: site for site in plan.sites}
    untouchable: dict[int, list[str]] = defaultdict(list)
    for item in plan.items:
        if item.type is type_ and item.decision is not Decision.apply:
            untouchable[item.site_id].append(item.slug)

    def execute(chunk: list[int], share: PipelineSettings, label: str):
        wanted = set(chunk)
        return execute_updates_task(client, quote([i for i in typed if i.site_id in wanted]), type_,
                                    quote([by_site[s] for s in chunk]), plan.run_id, share,
                                    untouchable=quote({s: untouchable[s] for s in chunk if s in untouchable}),
                                    label=label)

    calls = [call for chunk in await run_in_chunks(execute, site_ids, settings) for call in chunk]
    queued = {call.job_id: call.call.site_ids for call in calls if call.job_id}
    jobs = await asyncio.gather(*(
        wait_for_batch_job_task(client, job_id, "update", quote(sites), settings) for job_id, sites in queued.items()
    ))
    journal = JobJournal(settings.state_path)
    for outcome in jobs:
        if outcome.finished or outcome.job.status in ("expired", "not_found"):
            journal.finish(outcome.job.id)
    return calls, list(jobs)


async def run_cohort(
    client: DashboardClient, plan: Plan, cohort: PlanCohort, settings: PipelineSettings, run_checks: bool
) -> CohortResult:
    items = plan.to_apply(cohort.site_ids)
    result = CohortResult()
    calls: list[CallResult] = []
    for type_ in APPLY_ORDER:
        if any(item.type is type_ for item in items):
            type_calls, type_jobs = await update_type(client, plan, items, type_, settings)
            calls += type_calls
            result.jobs += type_jobs
    worked_on = {item.site_id for item in items}
    sites: list[SiteRecord] = [site for site in plan.sites if site.id in worked_on]
    if run_checks:
        checked = await run_in_chunks(
            lambda chunk, share, label: check_sites_task(client, quote(chunk), share, label=label), sites, settings
        )
        result.checks = {site_id: check for part in checked for site_id, check in part.items()}

    resynced = await run_in_chunks(
        lambda chunk, share, label: sync_sites_task(client, quote(chunk), share, label=f"after-updates-{label}"),
        sites, settings,
    )
    failures = {site_id: failure for part in resynced for site_id, failure in part.items()}
    after = await detect_updates_task(client, quote(sorted(worked_on)), settings.concurrency)
    result.items = reconcile_task(quote(items), quote(sites), quote(calls), quote(result.jobs), quote(failures),
                                  quote(after))
    return result


async def plan_night(
    client: DashboardClient,
    sites: list[SiteRecord],
    policy: Policy,
    selection: Selection,
    dry_run: bool,
    run_id: str,
    started: datetime,
    settings: PipelineSettings,
    run_dir: Path,
) -> Plan:
    """detect -> ignore lists -> policy -> plan (the detected lists are dropped once the plan holds them)."""
    ids = [site.id for site in sites]
    pending, ignored = await asyncio.gather(
        detect_updates_task(client, quote(ids), settings.concurrency), load_ignores_task(client, quote(ids))
    )
    plan = apply_policy_task(run_id=run_id, created_at=started, sites=quote(sites), pending=quote(pending),
                             ignored=quote(ignored), policy=policy, selection=selection, dry_run=dry_run,
                             settings=settings)
    return finalise_plan_task(quote(plan), policy.rollout, run_dir)


async def maintain_fleet(
    *,
    selection: Selection,
    dry_run: bool,
    policy_file: str | None,
    report_dir: str | None,
    dashboard: str | None,
    run_checks: bool,
) -> tuple[Summary, Path]:
    """The whole sentence; returns the summary and the run directory it was written to."""
    settings = pipeline_settings(report_dir)
    policy = resolve_policy(policy_file, settings)  # a bad policy fails here, before any request
    started = datetime.now(UTC)
    run_id = run_identity(started)
    run_dir = settings.report_dir / run_id
    async with await open_dashboard(dashboard) as client:
        sites, clients, errors = await select_fleet(client, selection)
        if not dry_run:  # a sync is a write request; a dry run plans from the dashboard's last sync
            sites = await sync_selected(client, sites, settings)
        plan = await plan_night(client, sites, policy, selection, dry_run, run_id, started, settings, run_dir)
        logger = get_run_logger()
        decided = Counter(item.decision.value for item in plan.items)
        logger.info("plan: %d site(s), %d item(s): %s", len(sites), len(plan.items),
                    ", ".join(f"{count} {decision}" for decision, count in decided.most_common()))
        attempted: list[Item] = []
        jobs: list[JobOutcome] = []
        checks: dict[int, SiteCheck] = {}
        cohorts: list[Cohort] = []
        for position, cohort in enumerate([] if dry_run else plan.cohorts):
            try:
                result = await run_cohort(client, plan, cohort, settings, run_checks)
            except FATAL_ERRORS:
                raise
            except Exception as error:  # a step failed after its retries: account for every item and say why
                errors.append(f"cohort {cohort.name!r}: a step failed: {error}")
                result = CohortResult(items=unverified(plan, cohort, f"the run could not verify it: {error}"))
            attempted += result.items
            jobs += result.jobs
            checks |= result.checks
            verdict = judge_cohort(cohort, len(failed_sites(result.items, result.checks)))
            cohorts.append(verdict)
            logger.info("cohort %r: %d site(s), %d failed, %s", cohort.name, verdict.sites, verdict.failures,
                        verdict.status)
            if verdict.status == "stopped":
                cohorts += stop_cohorts(plan, plan.cohorts[position + 1 :], verdict)
                break
    site_clients = {site.client for site in sites if site.client}
    summary = build_summary(
        plan=plan,
        attempted=attempted,
        jobs=[outcome.job for outcome in jobs],
        cohorts=cohorts if policy.rollout else [],
        checks=checks,
        clients=clients_with_recipients(clients, policy, site_clients),
        errors=errors,
        finished_at=datetime.now(UTC),
        dashboard=client.settings.base_url,
    )
    await write_summary_task(quote(summary), run_dir)
    return summary, run_dir


@flow(name="update-fleet", log_prints=False)
async def update_fleet(
    selection: Selection = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dry_run: bool = False,
    policy_file: str | None = None,
    report_dir: str | None = None,
    dashboard: str | None = None,
) -> str:
    """Apply the policy's updates to the selected sites now (no health checks, no report); returns summary.json.

    Args:
        selection: Which sites (ids or domains), tags, clients and update types; empty lists mean all.
        dry_run: Plan only: read the dashboard, write the plan and the summary, send no write request.
        policy_file: Policy file (YAML or TOML); empty means FLEET_POLICY_FILE, or apply everything.
        report_dir: Where the run directory goes; empty means FLEET_REPORT_DIR.
        dashboard: Name of a saved Dashboard Connection block; empty means the FLEET_* environment.
    """
    _, run_dir = await maintain_fleet(selection=selection, dry_run=dry_run, policy_file=policy_file,
                                      report_dir=report_dir, dashboard=dashboard, run_checks=False)
    return str(run_dir / "summary.json")
