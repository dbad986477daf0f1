"""The night's Prefect events, built without Prefect: names, resources (the dashboard and the site) and payloads
as docs/operations.md lists them, and what the kill switch counts."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

from fleet.model.events import (
    NIGHT_FINISHED,
    REPORTS_DELIVERED,
    REPORTS_NOT_DELIVERED,
    SITE_BROKEN,
    SITE_CONTAINED,
    SITE_DOWN,
    SITE_STILL_DOWN,
    VERSION_HELD,
    dashboard_key,
    held_events,
    night_finished_event,
    reports_event,
    site_events,
    still_down_event,
)
from fleet.model.summary import (
    Containment,
    ContainmentStatus,
    Delivery,
    Incident,
    Item,
    NightHold,
    Outcome,
    SiteAlarm,
    Summary,
    Suspect,
    UpdateType,
)

BASE = "https://ops:secret@Dash.Example.com:8443/wp-json"
NOW = datetime(2026, 11, 27, 2, 30, tzinfo=UTC)


def containment(status: ContainmentStatus) -> Containment:
    culprit = Suspect(type=UpdateType.plugin, slug="forms", name="Forms", from_version="1.0", to_version="2.0")
    return Containment(step=UpdateType.plugin, status=status, saw="HTTP 500",
                       culprit=culprit if status is ContainmentStatus.contained else None,
                       detail="done", next_steps="look")


def test_a_dashboard_is_named_by_its_host_and_port_never_its_credentials() -> None:
    assert dashboard_key(BASE) == "dash.example.com:8443"
    assert dashboard_key("https://dash.example.com/") == "dash.example.com"


def test_every_broken_site_counts_once_for_the_kill_switch_and_says_what_became_of_it() -> None:
    by_status = {status: site_events(BASE, 12, "Shop", "https://shop.example", containment(status), "run-1",
                                     "https://dash/page/12") for status in ContainmentStatus}
    for events in by_status.values():
        assert [event.event for event in events].count(SITE_BROKEN) == 1
    assert [e.event for e in by_status[ContainmentStatus.contained]] == [SITE_BROKEN, SITE_CONTAINED]
    assert [e.event for e in by_status[ContainmentStatus.unreachable]] == [SITE_BROKEN, SITE_DOWN]
    assert [e.event for e in by_status[ContainmentStatus.reported]] == [SITE_BROKEN]
    broken, contained = by_status[ContainmentStatus.contained]
    assert broken.resource == {"prefect.resource.id": "fleet.site.dash.example.com:8443.12",
                               "prefect.resource.name": "Shop", "fleet.site-id": "12",
                               "fleet.site-url": "https://shop.example", "fleet.dashboard": "dash.example.com:8443"}
    assert broken.related == [{"prefect.resource.id": "fleet.dashboard.dash.example.com:8443",
                               "prefect.resource.name": "dash.example.com:8443",
                               "prefect.resource.role": "dashboard"}]
    assert contained.payload["culprit"] == {"type": "plugin", "slug": "forms", "name": "Forms", "version": "2.0"}
    assert broken.payload["run_id"] == "run-1" and broken.payload["status"] == "contained"
    assert "secret" not in json.dumps([e.__dict__ for events in by_status.values() for e in events])


def test_a_night_finished_carries_its_counts_in_the_reports_words() -> None:
    items = [Item(site_id=1, site_url="u", site_name="A", type=UpdateType.plugin, slug=s, name=s, outcome=o)
             for s, o in [("a", Outcome.updated), ("b", Outcome.updated), ("c", Outcome.failed)]]
    alarm = SiteAlarm(site_id=1, site_url="u", site_name="A", saw="HTTP 500")
    summary = Summary(run_id="run-2", started_at=NOW, finished_at=NOW, dashboard=BASE, items=items, broken=[alarm])
    event = night_finished_event(summary, "https://other.example")
    assert event.event == NIGHT_FINISHED
    assert event.resource["prefect.resource.id"] == "fleet.dashboard.dash.example.com:8443"  # the summary's own
    assert event.payload["outcomes"] == {"updated": 2, "failed": 1}
    assert event.payload["items"] == 3 and event.payload["broken_sites"] == 1 and event.payload["dry_run"] is False
    json.dumps(event.payload)  # a Prefect event's payload is JSON


def test_reports_say_who_got_them_and_who_did_not() -> None:
    sent = Delivery(report="operator", recipient="ops@example.com", accepted=True, answer="250 ok")
    refused = Delivery(report="Acme", recipient="boss@acme.example", accepted=False, answer="550 no such user")
    assert reports_event("run-3", BASE, [sent], []).event == REPORTS_DELIVERED
    missed = reports_event("run-3", BASE, [sent, refused], ["Acme -> boss@acme.example: 550 no such user"])
    assert missed.event == REPORTS_NOT_DELIVERED
    assert missed.payload["not_delivered"] == ["Acme -> boss@acme.example"]
    assert missed.payload["delivered"] == ["operator -> ops@example.com"]


def test_held_versions_and_sites_still_down_name_what_they_are_about() -> None:
    hold = NightHold(type=UpdateType.plugin, slug="forms", name="Forms", version="2.0", reason="broke Shop",
                     site="Shop", since=date(2026, 11, 27))
    [held] = held_events([hold], BASE, "run-4")
    assert held.event == VERSION_HELD and held.resource["prefect.resource.id"] == "fleet.version.plugin:forms@2.0"
    assert held.payload["since"] == "2026-11-27"
    incident = Incident(id=7, dashboard=BASE, site_id=12, site_url="https://shop.example", site_name="Shop",
                        opened_by="run-1", opened_at=NOW, status="unreachable")
    event = still_down_event(incident, "run-5", 3)
    assert event.event == SITE_STILL_DOWN and event.resource["prefect.resource.id"].endswith(".12")
    assert event.payload["incident"] == 7 and event.payload["age_days"] == 3
