"""`update_fleet`, and the sentence every maintenance run follows:

sync -> detect -> ignore lists -> policy -> plan -> per cohort: execute by type (translations, plugins, themes,
core) -> sensor on queued jobs -> checks -> reconcile -> summary.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated
from uuid import uuid4

from prefect import flow
from prefect.runtime import flow_run
from pydantic import Field

from dashboard.client import DashboardClient
from fleet.execution import APPLY_ORDER, CallResult, JobOutcome
from fleet.job_journal import JobJournal
from fleet.plan import Plan, PlanCohort, PlanItem, SiteRecord
from fleet.policy import Policy, load_policy
from fleet.reconcile import summary_item
from fleet.rollout import failed_sites, judge_cohort, stop_cohorts
from fleet.run_summary import build_summary, clients_with_recipients
from fleet.settings import PipelineSettings
from fleet.summary import Cohort, Item, Outcome, Selection, SiteCheck, Summary
from flows.sync import DashboardBlock, SelectionParameter, open_dashboard, run_in_chunks, select_fleet, sync_selected
from tasks.checks import check_sites_task
from tasks.detect import detect_updates_task
from tasks.execute import execute_updates_task
from tasks.ignores import load_ignores_task
from tasks.plan import finalise_plan_task
from tasks.policy import apply_policy_task
from tasks.reconcile import reconcile_items_task
from tasks.retries import PERMANENT_ERRORS
from tasks.sensor import wait_for_batch_job_task
from tasks.summarise import write_summary_task

DryRun = Annotated[
    bool, Field(description="Plan only: read the dashboard, write the plan and summary, change nothing.")
]
PolicyFile = Annotated[str | None, Field(description="Policy file (YAML or TOML); empty means FLEET_POLICY_FILE.")]
ReportDir = Annotated[str | None, Field(description="Where the run directory goes; empty means FLEET_REPORT_DIR.")]


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

    def execute(chunk: list[int], share: PipelineSettings, label: str):
        wanted = set(chunk)
        return execute_updates_task(client, [i for i in typed if i.site_id in wanted], type_,
                                    [by_site[s] for s in chunk], plan.run_id, share, label=label)

    calls = [call for chunk in await run_in_chunks(execute, site_ids, settings) for call in chunk]
    queued = {call.job_id: call.call.site_ids for call in calls if call.job_id}
    jobs = await asyncio.gather(*(
        wait_for_batch_job_task(client, job_id, "update", sites, settings) for job_id, sites in queued.items()
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
            lambda chunk, share, label: check_sites_task(client, chunk, share, label=label), sites, settings
        )
        result.checks = {site_id: check for part in checked for site_id, check in part.items()}

    def reconcile(chunk: list[SiteRecord], share: PipelineSettings, label: str):
        ids = {site.id for site in chunk}
        mine = [call for call in calls if ids.intersection(call.call.site_ids)]
        job_ids = {call.job_id for call in mine}
        return reconcile_items_task(client, [i for i in items if i.site_id in ids], chunk, mine,
                                    [job for job in result.jobs if job.job.id in job_ids], share, label=label)

    result.items = [item for part in await run_in_chunks(reconcile, sites, settings) for item in part]
    return result


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
        ids = [site.id for site in sites]
        pending, ignored = await asyncio.gather(detect_updates_task(client, ids), load_ignores_task(client, ids))
        plan = apply_policy_task(run_id=run_id, created_at=started, sites=sites, pending=pending, ignored=ignored,
                                 policy=policy, selection=selection, dry_run=dry_run, settings=settings)
        plan = finalise_plan_task(plan, policy.rollout, run_dir)
        attempted: list[Item] = []
        jobs: list[JobOutcome] = []
        checks: dict[int, SiteCheck] = {}
        cohorts: list[Cohort] = []
        for position, cohort in enumerate([] if dry_run else plan.cohorts):
            try:
                result = await run_cohort(client, plan, cohort, settings, run_checks)
            except PERMANENT_ERRORS:
                raise
            except Exception as error:  # a step failed after its retries: account for every item and say why
                errors.append(f"cohort {cohort.name!r}: a step failed: {error}")
                result = CohortResult(items=unverified(plan, cohort, f"the run could not verify it: {error}"))
            attempted += result.items
            jobs += result.jobs
            checks |= result.checks
            verdict = judge_cohort(cohort, len(failed_sites(result.items, result.checks)))
            cohorts.append(verdict)
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
    await write_summary_task(summary, run_dir)
    return summary, run_dir


@flow(name="update-fleet", log_prints=False)
async def update_fleet(
    selection: SelectionParameter = Selection(),  # noqa: B008 - an immutable default rendered by the UI
    dry_run: DryRun = False,
    policy_file: PolicyFile = None,
    report_dir: ReportDir = None,
    dashboard: DashboardBlock = None,
) -> str:
    """Apply the policy's updates to the selected sites now (no health checks, no report); returns summary.json."""
    _, run_dir = await maintain_fleet(selection=selection, dry_run=dry_run, policy_file=policy_file,
                                      report_dir=report_dir, dashboard=dashboard, run_checks=False)
    return str(run_dir / "summary.json")
