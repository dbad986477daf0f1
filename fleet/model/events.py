"""The night's Prefect events, built without Prefect: what an operator reacts to (a site broken, down, contained, a
version held, a night finished, reports delivered or not), each naming its dashboard and site as resources, so that
Prefect automations can count and act on them. `orchestration/events.py` sends them; docs/operations.md lists them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fleet.model.summary import Containment, ContainmentStatus, Delivery, Incident, NightHold, Summary
from fleet.model.vocabulary import said_counts

SITE_BROKEN = "fleet.site.broken"
SITE_CONTAINED = "fleet.site.contained"
SITE_DOWN = "fleet.site.down"
SITE_STILL_DOWN = "fleet.site.still-down"
VERSION_HELD = "fleet.version.held"
NIGHT_FINISHED = "fleet.night.finished"
REPORTS_DELIVERED = "fleet.reports.delivered"
REPORTS_NOT_DELIVERED = "fleet.reports.not-delivered"

ID = "prefect.resource.id"
NAME = "prefect.resource.name"
ROLE = "prefect.resource.role"


@dataclass(frozen=True)
class FleetEvent:
    """One event as `prefect.events.emit_event` takes it; every label a string, the payload JSON."""

    event: str
    resource: dict[str, str]
    related: list[dict[str, str]] = field(default_factory=list)
    payload: dict[str, Any] = field(default_factory=dict)


def dashboard_key(base_url: str) -> str:
    """The dashboard as a resource names it: its host (and port), never a URL's credentials or path."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or base_url.strip() or "unknown").lower()
    return f"{host}:{parts.port}" if parts.port else host


def dashboard_resource(base_url: str, role: str | None = None) -> dict[str, str]:
    """`fleet.dashboard.<host>`; with `role`, as a related resource."""
    key = dashboard_key(base_url)
    return {ID: f"fleet.dashboard.{key}", NAME: key} | ({ROLE: role} if role else {})


def site_resource(base_url: str, site_id: int, name: str, url: str) -> dict[str, str]:
    """`fleet.site.<host>.<site id>`: a site id is only unique on its dashboard."""
    key = dashboard_key(base_url)
    return {ID: f"fleet.site.{key}.{site_id}", NAME: name, "fleet.site-id": str(site_id), "fleet.site-url": url,
            "fleet.dashboard": key}


def site_events(base_url: str, site_id: int, name: str, url: str, containment: Containment, run_id: str,
                dashboard_page: str | None = None) -> list[FleetEvent]:
    """A site an update step broke: always `fleet.site.broken` (what the kill switch counts), and
    `fleet.site.contained` when its culprit was found and left deactivated, or `fleet.site.down` when its MainWP
    Child no longer answers (only someone on the server can bring it back)."""
    culprit = containment.culprit
    payload = {
        "run_id": run_id, "step": containment.step.value, "status": containment.status.value,
        "headline": containment.headline, "saw": containment.saw, "detail": containment.detail,
        "next_steps": containment.next_steps, "dashboard_page": dashboard_page,
        "culprit": None if culprit is None else {"type": culprit.type.value, "slug": culprit.slug,
                                                 "name": culprit.name, "version": culprit.to_version},
    }
    resource = site_resource(base_url, site_id, name, url)
    related = [dashboard_resource(base_url, "dashboard")]
    names = [SITE_BROKEN]
    if containment.status in (ContainmentStatus.contained, ContainmentStatus.revived):
        names.append(SITE_CONTAINED)
    elif containment.status is ContainmentStatus.unreachable:
        names.append(SITE_DOWN)
    return [FleetEvent(event, resource, related, payload) for event in names]


def still_down_event(incident: Incident, run_id: str, age_days: int) -> FleetEvent:
    """A site an earlier night broke is still down (sent with its reminder, at most once a day)."""
    return FleetEvent(
        SITE_STILL_DOWN, site_resource(incident.dashboard, incident.site_id, incident.site_name, incident.site_url),
        [dashboard_resource(incident.dashboard, "dashboard")],
        {"run_id": run_id, "incident": incident.id, "opened_by": incident.opened_by, "age_days": age_days,
         "saw": incident.last_look, "next_steps": incident.next_steps, "dashboard_page": incident.dashboard_page})


def held_events(holds: Iterable[NightHold], base_url: str, run_id: str) -> list[FleetEvent]:
    """The versions this night found bad and holds from now on: `fleet.version.<type>:<slug>@<version>`."""
    return [
        FleetEvent(
            VERSION_HELD,
            {ID: f"fleet.version.{hold.type.value}:{hold.slug}@{hold.version}", NAME: hold.name or hold.slug,
             "fleet.item": hold.item, "fleet.version": hold.version},
            [dashboard_resource(base_url, "dashboard")],
            {"run_id": run_id, "type": hold.type.value, "slug": hold.slug, "version": hold.version,
             "reason": hold.reason, "site": hold.site, "since": hold.since.isoformat()})
        for hold in holds
    ]


def night_finished_event(summary: Summary, base_url: str) -> FleetEvent:
    """The night's counts in the words of its reports (items per outcome), its sites and its alarms."""
    return FleetEvent(
        NIGHT_FINISHED, dashboard_resource(summary.dashboard or base_url), [],
        {"run_id": summary.run_id, "dry_run": summary.dry_run, "started_at": summary.started_at.isoformat(),
         "finished_at": summary.finished_at.isoformat(), "sites": len(summary.sites), "items": len(summary.items),
         "outcomes": {outcome.value: number for outcome, number in said_counts(summary).items()},
         "broken_sites": len(summary.broken), "already_down_sites": len(summary.already_down),
         "open_incidents": sum(1 for incident in summary.incidents if incident.is_open),
         "errors": len(summary.errors), "did_nothing": summary.did_nothing})


def reports_event(run_id: str, base_url: str, deliveries: list[Delivery], problems: list[str]) -> FleetEvent:
    """`fleet.reports.delivered`, or `fleet.reports.not-delivered` naming each recipient not reached."""
    return FleetEvent(
        REPORTS_NOT_DELIVERED if problems else REPORTS_DELIVERED, dashboard_resource(base_url), [],
        {"run_id": run_id, "problems": problems,
         "delivered": [f"{d.report} -> {d.recipient or '(file)'}" for d in deliveries if d.accepted],
         "not_delivered": [f"{d.report} -> {d.recipient or '(file)'}" for d in deliveries if not d.accepted]})
