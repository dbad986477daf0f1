"""Staged rollout: split the sites that have work into ordered cohorts, and stop when a cohort fails too often."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

from fleet.model.summary import Cohort, HealthCheck, Item, Outcome
from fleet.model.vocabulary import count, operator_voice
from fleet.rules.plan import Decision, Plan, PlanCohort, SiteRecord
from fleet.rules.policy import Rollout, Rule

ALL_SITES = "all"
FAILED_OUTCOMES = frozenset({Outcome.failed, Outcome.unchanged, Outcome.unknown})


def _spread(site: SiteRecord) -> str:
    """A stable pseudo-random order, so percentage cohorts are not biased by site age (id order)."""
    return hashlib.sha256(str(site.id).encode()).hexdigest()


def _matches(site: SiteRecord, cohort: str) -> bool:
    kind, _, value = cohort.partition(":")
    value = value.strip().lower()
    if kind == "tag":
        return value in {tag.lower() for tag in site.tags}
    if kind == "client":
        return (site.client or "").lower() == value
    return value in site.names


def assign_cohorts(plan: Plan, rollout: Rollout | None) -> Plan:
    """Fill `plan.cohorts` and tag each item to apply with its cohort.

    Without a rollout every site with work is in one cohort with no budget. With one, sites in no cohort
    (no `rest` given) are not updated tonight, and their items say so.
    """
    with_work = sorted({item.site_id for item in plan.to_apply()})
    by_id = {site.id: site for site in plan.sites}
    if rollout is None:
        cohorts = [PlanCohort(name=ALL_SITES, site_ids=with_work, failure_budget=-1)]
    else:
        remaining = [by_id[site_id] for site_id in with_work]
        total = len(remaining)
        cohorts = []
        for name in rollout.cohorts:
            if name == "rest":
                chosen = remaining
            elif name.endswith("%"):
                size = min(len(remaining), math.ceil(total * float(name[:-1]) / 100))
                chosen = sorted(remaining, key=_spread)[:size]
            else:
                chosen = [site for site in remaining if _matches(site, name)]
            taken = {site.id for site in chosen}
            remaining = [site for site in remaining if site.id not in taken]
            ids = sorted(taken)
            cohorts.append(PlanCohort(name=name, site_ids=ids, failure_budget=rollout.budget_for(len(ids))))
    site_cohort = {site_id: cohort.name for cohort in cohorts for site_id in cohort.site_ids}
    for item in plan.to_apply():
        item.cohort = site_cohort.get(item.site_id)
        if item.cohort is None:
            item.decision, item.rule = Decision.excluded, Rule.rollout
            item.reason = "the site is in none of the rollout's cohorts"
    plan.cohorts = cohorts
    return plan


def failed_sites(items: Iterable[Item], checks: dict[int, HealthCheck]) -> set[int]:
    """Sites where an attempted item did not end updated, or whose health check failed (a site already down
    before the updates is not the cohort's failure)."""
    failed = {item.site_id for item in items if item.outcome in FAILED_OUTCOMES}
    return failed | {site_id for site_id, check in checks.items() if not check.healthy and check.before_ok is not False}


def judge_cohort(cohort: PlanCohort, failures: int) -> Cohort:
    """The cohort's result; `stopped` when its failures exceed its budget (a budget of -1 means none)."""
    over = 0 <= cohort.failure_budget < failures
    reason = (
        f"{count(failures, 'failed site')}, over the failure budget of {cohort.failure_budget}; later cohorts not "
        "started"
        if over
        else None
    )
    return Cohort(
        name=cohort.name, sites=len(cohort.site_ids), failures=failures, status="stopped" if over else "completed",
        reason=reason,
    )


def cohort_line(verdict: Cohort) -> str:
    """The cohort's verdict in the log: its sites, and how many of them failed and what that counts."""
    voice = operator_voice()
    *first, last = [voice.term(outcome).word for outcome in sorted(FAILED_OUTCOMES, key=list(Outcome).index)]
    return (f"cohort {verdict.name!r}: {count(verdict.sites, 'site')}, {count(verdict.failures, 'failed site')} "
            f"(an item {', '.join(first)} or {last}, or a failed check); {verdict.status}")


def stop_cohorts(plan: Plan, stopped: list[PlanCohort], because: Cohort) -> list[Cohort]:
    """Mark the items of cohorts that will not start as excluded, naming the cohort that stopped the rollout."""
    names = {cohort.name for cohort in stopped}
    reason = f"rollout stopped: cohort {because.name!r} had {count(because.failures, 'failed site')}, budget exceeded"
    for item in plan.to_apply():
        if item.cohort in names:
            item.decision, item.rule, item.reason = Decision.excluded, Rule.rollout, reason
    return [
        Cohort(name=cohort.name, sites=len(cohort.site_ids), status="not_started", reason=reason) for cohort in stopped
    ]
