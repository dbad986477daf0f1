"""Give every item exactly one outcome, from a fresh sync and a fresh list, never from what the calls claimed.

Failures can be silent (a failed theme is in neither `updated` nor `errors`; a "success" with `old_version:""`
installed nothing), so the version seen after a re-sync decides; the answers only explain why. One exception:
a site that can no longer be re-synced (a fatal at load killed its MainWP Child, or its check made it known
offline) has only the answer left, so an item the dashboard answered updated `old -> new` is counted updated,
"not verified", never lost as "no answer".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from fleet.model.keys import item_key
from fleet.model.summary import DRY_RUN_RULE, Item, Outcome
from fleet.rules.execution import CallResult, ItemReport, JobOutcome
from fleet.rules.plan import Decision, DetectedUpdate, Plan, PlanItem, SiteRecord
from fleet.rules.sync_failures import SyncFailures

NOT_VERIFIED = "updated, not verified"  # how an `updated` item's reason starts when only the answer says so


def summary_item(item: PlanItem, site: SiteRecord, outcome: Outcome, reason: str | None, **changes) -> Item:
    return Item(
        site_id=item.site_id,
        site_url=site.url,
        site_name=site.name,
        client=site.client,
        type=item.type,
        slug=item.slug,
        name=item.name or item.slug,
        from_version=item.from_version,
        to_version=changes.get("to_version", item.to_version),
        outcome=outcome,
        reason=reason,
        rule=changes.get("rule", item.rule),
        until=item.until,
        opens_at=item.opens_at,
        cohort=item.cohort,
        approved_by=item.approved_by,
    )


def not_attempted(plan: Plan) -> list[Item]:
    """Items the plan decided not to apply, with the rule and reason that stopped them.

    In a dry run the items to apply are reported as excluded by the `dry_run` rule, saying what would happen.
    """
    sites = {site.id: site for site in plan.sites}
    items = []
    for item in plan.items:
        if item.decision is not Decision.apply:
            items.append(summary_item(item, sites[item.site_id], item.outcome, item.reason))
        elif plan.dry_run:
            reason = f"dry run: would update {item.from_version or '?'} -> {item.to_version or 'latest'}"
            items.append(summary_item(item, sites[item.site_id], Outcome.excluded, reason, rule=DRY_RUN_RULE))
    return items


class _Evidence:
    """Everything the calls and jobs said, indexed for lookups per item."""

    def __init__(self, calls: Iterable[CallResult], jobs: Iterable[JobOutcome]) -> None:
        self.job_by_id = {outcome.job.id: outcome for outcome in jobs}
        self.call_by_site: dict[tuple[int, str], CallResult] = {}
        # a site's items of one type may go in several calls (slug groups, a slow site's parts): each item is
        # explained by the call that carried it, not by whichever of them came last
        self.call_by_item: dict[tuple[int, str, str], CallResult] = {}
        self.item_reports: dict[tuple[int, str, str], ItemReport] = {}
        self.site_errors: dict[tuple[int, str | None], list[str]] = defaultdict(list)
        reports: list[ItemReport] = []
        for call in calls:
            for site_id in call.call.site_ids:
                self.call_by_site[(site_id, call.call.type)] = call
                for slug in call.call.slugs:
                    self.call_by_item[(site_id, call.call.type, slug)] = call
            reports += call.reports
            if call.job_id in self.job_by_id:
                reports += self.job_by_id[call.job_id].reports
        for report in reports:
            if report.slug is not None and report.type is not None:
                key = item_key(report)
                if not report.ok or key not in self.item_reports:
                    self.item_reports[key] = report
            elif not report.ok:
                self.site_errors[(report.site_id, report.type)].append(report.message or "error")

    def error_for(self, item: PlanItem) -> str | None:
        report = self.item_reports.get(item_key(item))
        if report is not None and not report.ok:
            return report.message or "the dashboard reported an error"
        messages = self.site_errors.get((item.site_id, item.type)) or self.site_errors.get((item.site_id, None))
        return "; ".join(messages) if messages else None


def reconcile(
    items: list[PlanItem],
    sites: dict[int, SiteRecord],
    calls: list[CallResult],
    jobs: list[JobOutcome],
    resync_errors: dict[int, str],
    after: list[DetectedUpdate],
) -> list[Item]:
    """Outcomes of the items that were to be applied.

    `after` is the pending list read after re-syncing the sites; an item is updated when it is gone from it
    or its installed version moved. `resync_errors` names the sites whose re-sync failed (no fresh truth).
    """
    evidence = _Evidence(calls, jobs)
    fresh = {update.key: update for update in after}
    results = []
    for item in items:
        site = sites[item.site_id]
        error = evidence.error_for(item)
        now = fresh.get(item_key(item))
        if item.site_id in resync_errors:
            report = evidence.item_reports.get(item_key(item))
            if error:
                results.append(summary_item(item, site, Outcome.failed, error))
            elif report is not None and report.ok and report.old_version:  # the only evidence left: keep it
                reason = (f"{NOT_VERIFIED}: the dashboard answered updated {report.old_version} -> "
                          f"{report.new_version or '?'}, then the site stopped answering it "
                          f"(re-sync: {resync_errors[item.site_id]})")
                results.append(summary_item(item, site, Outcome.updated, reason, rule=None,
                                            to_version=report.new_version or item.to_version))
            else:
                reason = f"could not re-sync the site to verify the update: {resync_errors[item.site_id]}"
                results.append(summary_item(item, site, Outcome.unknown, reason))
            continue
        if now is None or now.from_version != item.from_version:
            to_version = now.from_version if now is not None and now.from_version else item.to_version
            note = f"the version moved although an error was reported: {error}" if error else None
            results.append(summary_item(item, site, Outcome.updated, note, to_version=to_version, rule=None))
            continue
        call = (evidence.call_by_item.get(item_key(item))
                or evidence.call_by_site.get((item.site_id, item.type)))
        results.append(summary_item(item, site, *_not_moved(item, error, call, evidence)))
    return results


def _not_moved(
    item: PlanItem, error: str | None, call: CallResult | None, evidence: _Evidence
) -> tuple[Outcome, str]:
    if error:
        return Outcome.failed, error
    if call is None:
        return Outcome.unknown, "no update call covered this item"
    if call.error:
        return Outcome.failed, f"the update call failed: {call.error}"
    if call.lost and not call.quiet:
        return Outcome.unknown, f"the call's answer was lost ({call.lost}) and the site was still busy when re-read"
    if call.lost:
        return Outcome.failed, (f"the call's answer was lost ({call.lost}); the site went quiet and the item "
                                "was still not installed")
    job = evidence.job_by_id.get(call.job_id) if call.job_id else None
    if call.job_id and (job is None or not job.finished or job.job.status == "failed"):
        why = job.job.reason if job is not None and job.job.reason else "the job did not finish"
        return Outcome.unknown, f"batch job {call.job_id}: {why}"
    report = evidence.item_reports.get(item_key(item))
    if report is not None and report.ok:
        installed = " (it said nothing was installed)" if report.old_version == "" else ""
        return Outcome.unchanged, f"reported updated but the version did not move{installed}"
    return Outcome.unchanged, "no error was reported but the version did not move"


def reconcile_lane(
    items: list[PlanItem],
    sites: list[SiteRecord],
    calls: list[CallResult],
    jobs: list[JobOutcome],
    resync_failures: SyncFailures,
    after: list[DetectedUpdate],
) -> list[Item]:
    """Every item of a lane with one outcome, from the re-sync's failures and the fresh list."""
    resync_errors = {site_id: message for site_id, (_, message) in resync_failures.items()}
    return reconcile(items, {site.id: site for site in sites}, calls, jobs, resync_errors, after)
