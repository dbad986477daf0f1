"""The security lane: what an update that fixes a vulnerability at or above the policy's `security` threshold may
go past tonight (a closed maintenance window and `min_age_days`, unless the policy's `security:` keeps them), and
what it never goes past (a blackout, a hold, an ignore rule, the semver rule: the plan's other rules still decide
it). The plan asks the lane once per update; a routine update gets nothing from it."""

from __future__ import annotations

from dataclasses import dataclass

from fleet.model.vulnerability import ItemVulnerabilities, VulnerabilityClass
from fleet.rules.policy import SecurityLane
from fleet.rules.windows import Deferral


@dataclass(frozen=True)
class LanePass:
    """What the lane lets one update past tonight."""

    fix: str | None = None  # the vulnerabilities it fixes at or above the threshold, in a few words
    past_window: bool = False  # its site's closed window (never a blackout) opens for it
    past_min_age: bool = False  # it does not wait for the release to age
    approval: str | None = None  # why a person is asked first (the policy's security.approval)


ROUTINE = LanePass()


def lane_pass(vulnerabilities: ItemVulnerabilities | None, deferral: Deferral | None, lane: SecurityLane) -> LanePass:
    fix = urgent_fix(vulnerabilities, lane)
    if fix is None:
        return ROUTINE
    return LanePass(fix=fix, past_window=deferral is not None and not deferral.blackout and not lane.windows,
                    past_min_age=not lane.min_age,
                    approval=f"a security fix ({fix}): the policy's security.approval asks a person"
                    if lane.approval else None)


def urgent_fix(vulnerabilities: ItemVulnerabilities | None, lane: SecurityLane) -> str | None:
    """The vulnerabilities at or above the policy's threshold that the item's update fixes, in a few words (the
    worst first); None when it fixes none: the item is routine for the security lane."""
    if vulnerabilities is None or vulnerabilities.security is not VulnerabilityClass.fixes:
        return None
    counted = sorted((v for v in vulnerabilities.fixes if lane.counts(v.cvss_score, v.cvss_rating)),
                     key=lambda v: -(v.cvss_score if v.cvss_score is not None else 10.0))
    return ", ".join(v.label for v in counted) or None
