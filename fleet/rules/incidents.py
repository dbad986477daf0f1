"""Incidents across nights: the breakage that opens one, what a later look at the site changes, what closes it.

A site a night broke is an open incident until a later check of it passes AND nothing a night switched off on it is
still off: a site left with its culprit deactivated answers again, but is not what it was, so it stays open (and
in every report) until a fixed release is active again or an operator closes it. A night that ends with an
incident of an earlier night still down exits with its own code (`SitesStillDown`), and the operator is alerted
again at most once a day per incident.
"""

from __future__ import annotations

from datetime import date, datetime

from fleet.model.summary import ContainmentStatus, HealthCheck, Incident, SiteAlarm, UpdateType
from fleet.model.vocabulary import count
from fleet.model.wordpress_version import newer
from fleet.rules.breakage import NightFailure
from fleet.rules.plan import Decision, PlanItem


class SitesStillDown(NightFailure):  # noqa: N818 - it names what happened, as Prefect's state message shows it
    """Sites broken on earlier nights are still down."""


def opened(alarm: SiteAlarm, check: HealthCheck | None, dashboard: str, run_id: str, at: datetime) -> Incident:
    """The incident a site broken tonight opens: its culprit or suspects, and what the night did about it."""
    contained = alarm.containment
    status = contained.status.value if contained is not None else "broken"
    culprit = contained.culprit if contained is not None else None
    left_off = ([culprit.slug] if contained is not None and contained.status is ContainmentStatus.contained
                and culprit is not None and culprit.type is UpdateType.plugin else [])
    down = _down(alarm, check)
    revived = contained is not None and contained.status is ContainmentStatus.revived and not down
    incident = Incident(
        dashboard=dashboard, site_id=alarm.site_id, site_url=alarm.site_url, site_name=alarm.site_name,
        client=alarm.client, opened_by=run_id, opened_at=at, status=status, saw=alarm.saw, culprit=culprit,
        suspects=alarm.suspects, last_good=culprit.from_version if culprit is not None else None,
        done=_done(alarm, run_id), next_steps=contained.next_steps if contained else
        "roll back the suspects by hand (or restore the backup)", dashboard_page=alarm.dashboard_page,
        deactivated=left_off, down=down, last_look=f"{run_id}: {'down' if down else 'up'} after the night",
        alerted_on=at.date())
    if revived:  # up again with the last working version active: nothing is left for a person to do
        return incident.model_copy(update={"closed_at": at, "closed_by": run_id,
                                           "close_reason": f"revived by the night: {contained.detail}"})
    return incident


def broken_again(incident: Incident, alarm: SiteAlarm, check: HealthCheck | None, run_id: str,
                 active: dict[str, bool] | None = None) -> Incident:
    """An open incident whose site a night broke again: still one incident per site (the way back's failed fixed
    release, or another release breaking a site repaired by hand), told with this break's own facts (its status,
    culprit or suspects, what it saw, what is switched off and whether the site is down), never the old break's.
    The old break stays in what the nights did (`done`). A plugin the old break left off that this break's
    updates touched, or that the dashboard lists switched on (`active`: None when unknown), is no longer said to be
    off."""
    again = opened(alarm, check, incident.dashboard, run_id, incident.opened_at)
    touched = {s.slug for s in again.suspects if s.type is UpdateType.plugin}
    if again.culprit is not None and again.culprit.type is UpdateType.plugin:
        touched.add(again.culprit.slug)
    still_off = [slug for slug in incident.deactivated
                 if slug not in touched and (active is None or active.get(slug) is False)]
    earlier = f"earlier break: {_told(incident)}"
    first = incident.culprit.from_version if incident.culprit is not None else None
    return incident.model_copy(update={
        "status": again.status, "saw": again.saw, "culprit": again.culprit, "suspects": again.suspects,
        "last_good": incident.last_good or first or again.last_good,
        "done": f"{incident.done}; {earlier}; {again.done}", "next_steps": again.next_steps,
        "deactivated": list(dict.fromkeys(again.deactivated + still_off)), "down": again.down,
        "last_look": again.last_look})


def _told(incident: Incident) -> str:
    """An incident's break in a few words, kept in its history when a new break replaces its facts."""
    culprit = incident.culprit
    if culprit is not None:
        return f"{culprit.name or culprit.slug} {culprit.from_version or '?'} -> {culprit.to_version or '?'}"
    return ", ".join(f"{s.name or s.slug} -> {s.to_version or '?'}" for s in incident.suspects) or incident.saw


def looked_at(incident: Incident, check: HealthCheck | None, active: dict[str, bool] | None, run_id: str,
              at: datetime) -> Incident:
    """The incident after tonight's look at its site (`check`: None, not looked at; `active`: the site's plugins
    and whether each is active, None when they could not be read). Closed when the check passes and nothing a
    night switched off is still off."""
    if check is None:
        return incident
    if check.unverified and check.healthy:  # nothing seen failing, nor seen passing: not a look
        return incident.model_copy(update={"last_look": f"{run_id}: not verified: {check.unverified}"})
    down = not check.healthy
    if not down:
        incident = culprit_learned(incident, active)
    off = still_off(incident, active)
    if down:
        look = f"{run_id}: still down: {check.problem or 'it fails its check'}"
    elif off:
        look = f"{run_id}: up; still deactivated: {', '.join(off)}"
    elif active is None and incident.deactivated:
        look = f"{run_id}: up; its plugins could not be read, so what was deactivated is not known to be back on"
    else:
        return incident.model_copy(update={
            "down": False, "deactivated": [], "last_look": f"{run_id}: up, and nothing is left deactivated",
            "closed_at": at, "closed_by": run_id,
            "close_reason": "a check passed and nothing the nights deactivated is still deactivated"})
    return incident.model_copy(update={"down": down, "last_look": look})


def culprit_learned(incident: Incident, active: dict[str, bool] | None) -> Incident:
    """A break whose culprit the night could not find (a child dead at load cannot be asked), up again: when
    exactly one of its suspect plugins is now switched off (the operator's repair renames its folder, and WordPress
    switches it off), that one is its culprit, and the others were innocent."""
    if incident.culprit is not None or active is None:
        return incident
    off = [s for s in incident.suspects if s.type is UpdateType.plugin and active.get(s.slug) is False]
    if len(off) != 1 or len(incident.suspects) < 2:
        return incident
    return incident.model_copy(update={"culprit": off[0], "done": f"{incident.done}; culprit known: "
                                       f"{off[0].name or off[0].slug} {off[0].to_version} was found switched off "
                                       "once the site was up again"})


def still_off(incident: Incident, active: dict[str, bool] | None) -> list[str]:
    """The plugins a night deactivated that are still installed and inactive (a plugin since removed is not
    off: the operator chose). Unknown plugin states leave every one as still off."""
    if active is None:
        return list(incident.deactivated)
    return [slug for slug in incident.deactivated if active.get(slug) is False]


def fixed_releases(items: list[PlanItem], incidents: list[Incident]) -> list[PlanItem]:
    """The way back: each item to apply tonight that is a newer release of a culprit an open incident left
    deactivated on that site, knowing the version that last worked there (`last_good`: what to restore if it fails
    too). The night installs it on that site alone, switches it on and probes: healthy, the incident closes;
    broken, it is deactivated again and that release held too."""
    culprits = {(incident.site_id, incident.culprit.slug): incident
                for incident in incidents if incident.culprit is not None
                and incident.culprit.type is UpdateType.plugin and incident.culprit.slug in incident.deactivated}
    return [item.model_copy(update={"last_good": _last_good(culprits[(item.site_id, item.slug)])}) for item in items
            if item.decision is Decision.apply and item.type is UpdateType.plugin and (item.site_id, item.slug)
            in culprits and newer(item.to_version, culprits[(item.site_id, item.slug)].culprit.to_version)]


def _last_good(incident: Incident) -> str | None:
    """The version that last worked on the incident's site: before its first break (an incident kept before it
    was remembered: its culprit's version before)."""
    return incident.last_good or (incident.culprit.from_version if incident.culprit is not None else None)


def alert_due(incident: Incident, run_id: str, today: date) -> bool:
    """An incident of an earlier night whose site is still down, not yet alerted today."""
    return incident.is_open and incident.down and incident.opened_by != run_id and incident.alerted_on != today


def still_down(incidents: list[Incident], run_id: str) -> list[Incident]:
    """The open incidents of earlier nights whose site is still down."""
    return [incident for incident in incidents if incident.is_open and incident.down and incident.opened_by != run_id]


def still_down_message(incidents: list[Incident], run_id: str, today: date) -> str:
    """The flow run's failure message: the sites still down, their age and what to do, in one line."""
    named = "; ".join(f"{i.site_name or i.site_url} {i.site_url} (incident {i.id}, open "
                      f"{count(i.age_days(today), 'day')} since run {i.opened_by}: {i.next_steps})"
                      for i in incidents[:10])
    more = f" and {len(incidents) - 10} more" if len(incidents) > 10 else ""
    return f"run {run_id}: {count(len(incidents), 'site')} broken on earlier nights still down: {named}{more}"


def _down(alarm: SiteAlarm, check: HealthCheck | None) -> bool:
    contained = alarm.containment
    if contained is not None and contained.status is ContainmentStatus.unreachable:
        return True
    if check is not None:
        return not check.healthy
    return contained is None or contained.status not in (ContainmentStatus.contained, ContainmentStatus.revived)


def _done(alarm: SiteAlarm, run_id: str) -> str:
    contained = alarm.containment
    if contained is None:
        return f"{run_id}: broken after the night; nothing was switched off"
    return f"{run_id}: {contained.headline}: {contained.detail}"
