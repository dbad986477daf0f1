"""The night's approval gate, without Prefect: which items wait for a person, and what their answer does.

Items the policy's `approval` section names are planned as `awaiting_approval`; once the unattended items are
done the flow asks a person (flows/approval.py). Approved items go through the same lanes, checks and
reconcile as the others; the rest end `held`, saying why. An unanswered gate never applies anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from fleet.model.keys import ItemKey, item_key
from fleet.rules.plan import Decision, Plan, PlanCohort, PlanItem
from fleet.rules.policy import Approval, Rule


@dataclass
class ApprovalAnswer:
    """What the person said: the approved items, who they are; or that nobody answered in time."""

    approved: set[ItemKey] = field(default_factory=set)
    by: str | None = None
    timed_out: bool = False


def awaiting(plan: Plan) -> list[PlanItem]:
    return [item for item in plan.items if item.decision is Decision.awaiting_approval]


def settle(plan: Plan, answer: ApprovalAnswer) -> Plan | None:
    """Mark every waiting item approved (to apply) or held with the reason; return the plan of the approved items
    alone, one cohort named `approved`, for a pass of their own (None when nothing was approved)."""
    approved: list[PlanItem] = []
    for item in awaiting(plan):
        if not answer.timed_out and item_key(item) in answer.approved:
            item.decision, item.approved_by, item.cohort = Decision.apply, answer.by or "unknown", "approved"
            approved.append(item)
            continue
        item.decision, item.rule = Decision.held, Rule.approval
        if answer.timed_out:
            item.reason = f"no approval before the timeout ({item.reason})"
        else:
            item.reason = f"not approved by {answer.by or 'the approver'} ({item.reason})"
    if not approved:
        return None
    site_ids = sorted({item.site_id for item in approved})
    return plan.model_copy(update={"items": approved, "cohorts": [PlanCohort(name="approved", site_ids=site_ids)]})


def gate_timeout(approval: Approval | None, plan: Plan, items: list[PlanItem], now: datetime | None = None) -> int:
    """Seconds the gate waits: the policy's timeout, but never past the first window that closes on a waiting
    item's site (at least one second, so that a gate always opens and says so)."""
    limit = (approval.timeout if approval else Approval().timeout).total_seconds()
    now = now or datetime.now(UTC)
    waiting = {item.site_id for item in items}
    closes = [site.window_closes_at for site in plan.sites if site.id in waiting and site.window_closes_at]
    if closes:
        limit = min(limit, (min(closes) - now).total_seconds())
    return max(1, int(limit))
