"""Assemble `summary.json` from the plan and what reconcile found, and check that no item went missing."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from fleet.model.summary import (
    DRY_RUN_RULE,
    ApprovalRecord,
    Cohort,
    Containment,
    DashboardWork,
    HealthCheck,
    Item,
    Job,
    LastSync,
    NightHold,
    Outcome,
    ReportClient,
    SiteAlarm,
    SiteReport,
    Summary,
)
from fleet.model.vocabulary import count
from fleet.pacing.call_sizing import CallSizer, Operation
from fleet.rules.breakage import judge_sites
from fleet.rules.plan import Plan
from fleet.rules.policy import Policy
from fleet.rules.reconcile import not_attempted
from fleet.state.job_journal import OpenRun


class MissingItems(RuntimeError):
    """An item found at detection has no outcome, or more than one: a bug, reported rather than hidden."""


def build_summary(
    *,
    plan: Plan,
    attempted: list[Item],
    jobs: list[Job],
    cohorts: list[Cohort],
    checks: dict[int, HealthCheck],
    clients: list[ReportClient],
    errors: list[str],
    finished_at: datetime,
    dashboard: str | None = None,
    holds: list[NightHold] | None = None,
    mail_clients_when_broken: bool = False,
    approval: ApprovalRecord | None = None,
    containments: dict[int, Containment] | None = None,
) -> Summary:
    items = not_attempted(plan) + attempted
    # one outcome per item and run: an item an interrupted run updated may be offered again since, tonight's own
    keys = Counter((item.site_id, item.type, item.slug, item.applied_by_run) for item in items)
    missing = [item for item in plan.items if (item.site_id, item.type, item.slug, None) not in keys]
    twice = [key for key, n in keys.items() if n > 1]
    if missing or twice:
        listed = ", ".join([f"site {i.site_id} {i.type} {i.slug}: no outcome" for i in missing[:10]]
                           + [f"site {key[0]} {key[1]} {key[2]}: two outcomes" for key in twice[:10]])
        raise MissingItems(f"{count(len(missing), 'detected item')} without an outcome, {len(twice)} with more "
                           f"than one: {listed}")
    # a dry run lists what it would apply before what it would not
    items.sort(key=lambda item: (plan.dry_run and item.rule != DRY_RUN_RULE, item.site_id,
                                 list(type(item.type)).index(item.type), item.slug))
    broken, already_down = judge_sites(items, [(site.id, site.url, site.name, site.client) for site in plan.sites],
                                       checks, dashboard, containments or {})
    updated_sites = {item.site_id for item in items if item.outcome is Outcome.updated}  # as judged: a release
    # that was never switched on is not an update
    if not mail_clients_when_broken:
        clients = hold_client_mail(clients, broken)
    sites = [
        SiteReport(
            site_id=site.id,
            site_url=site.url,
            site_name=site.name,
            client=site.client,
            status=site.status.value,
            updated=site.id in updated_sites,
            check=checks.get(site.id),
            deferred=site.deferral.reason if site.deferral else None,
            opens_at=site.deferral.opens_at if site.deferral else None,
            revived=site.revived,
        )
        for site in plan.sites
    ]
    return Summary(
        run_id=plan.run_id,
        started_at=plan.created_at,
        finished_at=finished_at,
        dry_run=plan.dry_run,
        planned_for=plan.planned_for,
        last_sync=LastSync.of([site.last_sync for site in plan.sites]) if plan.dry_run else None,
        dashboard=dashboard,
        approval=approval,
        selection=plan.selection,
        broken=broken,
        already_down=already_down,
        holds=holds or [],
        counts=Summary.count(items),
        items=items,
        sites=sites,
        clients=clients,
        jobs=jobs,
        cohorts=cohorts,
        errors=errors,
    )


def clients_with_recipients(clients: list[ReportClient], policy: Policy, site_clients: set[str]) -> list[ReportClient]:
    """The clients that own selected sites, with the policy's recipients replacing the client's e-mail, and
    where their replies go."""
    overrides = {name.lower(): recipients for name, recipients in policy.recipients.items()}
    replies = {name.lower(): address for name, address in policy.reply_to.items()}
    chosen = []
    for client in clients:
        if client.name not in site_clients:
            continue
        recipients = overrides.get(client.name.lower()) or ([client.email] if client.email else [])
        chosen.append(client.model_copy(update={"recipients": list(recipients),
                                                "reply_to": replies.get(client.name.lower())}))
    return chosen


def hold_client_mail(clients: list[ReportClient], broken: list[SiteAlarm]) -> list[ReportClient]:
    """A client whose site the night broke is not mailed automatically: the operator reviews the report first."""
    names: dict[str, list[str]] = {}
    for alarm in broken:
        if alarm.client:
            names.setdefault(alarm.client, []).append(alarm.site_name or alarm.site_url)
    return [
        client.model_copy(update={"held_for_review": f"the night broke {', '.join(names[client.name])}"})
        if client.name in names else client
        for client in clients
    ]


def dashboard_work(
    sizer: CallSizer, *, syncs: int, update_items: int, checks: int, naive_syncs: int, naive_checks: int
) -> DashboardWork:
    """The night's site operations against the naive chain's, in modelled seconds at the measured times."""
    rates = {operation: sizer.estimate(operation) for operation in Operation}
    known = all(rate is not None for operation, rate in rates.items() if operation != Operation.check or checks)

    def seconds(sync: int, check: int) -> float | None:
        if not known:
            return None
        return round(sync * rates[Operation.sync] + update_items * rates[Operation.update_item]
                     + check * (rates[Operation.check] or 0), 1)

    return DashboardWork(syncs=syncs, update_items=update_items, checks=checks, naive_syncs=naive_syncs,
                         naive_checks=naive_checks, seconds=seconds(syncs, checks),
                         naive_seconds=seconds(naive_syncs, naive_checks))


def interrupted_summary(run: OpenRun, items: list[Item], by: str, dashboard: str, finished_at: datetime) -> Summary:
    """The summary.json a killed run never wrote: marked interrupted, with the items it applied (those of the
    accounting run's that name it), pointing to the run `by` that accounted for them."""
    items = [item for item in items if item.applied_by_run == run.run_id]
    return Summary(
        run_id=run.run_id, started_at=run.started_at, finished_at=finished_at, dashboard=dashboard,
        counts=Summary.count(items), items=items, interrupted=True, accounted_by=by,
        errors=[f"this run was interrupted; run {by} accounted for the {count(len(items), 'item')} it applied"],
    )
