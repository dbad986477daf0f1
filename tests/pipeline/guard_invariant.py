"""The guard's promise across nights, for the generated sequences (tests/pipeline/night_invariants.py,
bench/invariants.py): no site whose guard answers is left down by a plugin or theme update at the night's end.

`guarded_sites_left_down(truth, summary, policy)` reads the emulator's ground truth after the night and the night's
summary, and returns one line per violation (empty: the promise held). A site counts when its guard is armed, not
removed, its must-use loader in place and its version one the night counts on, and built with one of `keys` (the
home's public keys; None: any). It is left down by the night when its pages fail at the end (dead at load, or a
critical error) and the release that kills it is a plugin or theme the night sent to it. Not promised (and not
flagged): the policy's `contain: report`, a culprit the policy never deactivates, core releases (out of the
guard's reach), and a site the dashboard could not reach before the night.
"""

from __future__ import annotations

from typing import Any

from fleet.model.summary import Outcome, Summary
from fleet.rules.policy import ContainMode, Policy
from guard.models import GuardStatus
from guard.signing import PROTOCOL

SENT = (Outcome.updated, Outcome.failed, Outcome.unchanged, Outcome.unknown)


def guard_answers(site: dict[str, Any], keys: list[str] | None = None) -> bool:
    """The site's guard is one the night can count on (as `fleet guard status` says it), built with `keys`."""
    guard = site.get("guard")
    if not guard or not guard["armed"] or guard["removed"]:
        return False
    status = GuardStatus(protocol=PROTOCOL, version=guard["version"] or "", mode=guard["mode"] or "")
    return status.unusable is None and (keys is None or bool(set(keys) & set(guard["keys"])))


def guarded_sites_left_down(truth: dict[str, Any], summary: Summary, policy: Policy | None = None,
                            keys: list[str] | None = None) -> list[str]:
    """One line per site whose guard answers and that a plugin or theme update of this night left down."""
    policy = policy or Policy()
    if summary.dry_run or policy.contain is ContainMode.report:
        return []
    sent = {(item.site_id, item.type.value, item.slug) for item in summary.items if item.outcome in SENT}
    down_before = {alarm.site_id for alarm in summary.already_down}
    violations = []
    for key, site in truth["sites"].items():
        site_id = int(key)
        if site_id in down_before or not guard_answers(site, keys) or site["front_end"]["status"] == "up":
            continue
        culprit = site["front_end"]["fatal_by"] or site["front_end"]["broken_by"] or ""
        kind, _, slug = culprit.partition(":")
        if kind not in ("plugin", "theme") or (site_id, kind, slug) not in sent or not policy.may_deactivate(slug):
            continue
        alarm = next((a for a in summary.broken if a.site_id == site_id), None)
        said = alarm.containment.detail if alarm is not None and alarm.containment is not None else "no containment"
        violations.append(f"site {site_id} ({site['url']}): its guard answers, yet {culprit} left it "
                          f"{site['front_end']['status']} at the night's end: {said}")
    return violations
