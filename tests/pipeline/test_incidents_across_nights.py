"""A broken site is an incident until it is resolved: opened by the night that broke it, in every later night's
report with its age, a night with its site still down exits 8 (and alerts again, at most once a day), closed by
the check after the repair, or by the operator. Nights against one emulator and one state database, over a real
socket; each night through `fleet nightly`."""

from __future__ import annotations

import email
import email.policy
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import ContainmentStatus, Summary
from fleet.state.incidents import IncidentStore
from tests.pipeline.conftest import memory_of

pytestmark = pytest.mark.usefixtures("prefect_harness")


def site_with_an_active_plugin_update(truth: dict) -> tuple[dict, str]:
    for site in truth["sites"].values():
        if site["status"] == "connected" and site["reachable"]:
            active = [u["slug"] for u in site["pending_updates"]
                      if u["type"] == "plugin" and site["plugins"][u["slug"]]["active"]]
            if active:
                return site, active[0]
    raise AssertionError("no site with an active plugin to update")


class Nights:
    """`fleet nightly` over one site, night after night, with one report directory (and so one state database)."""

    def __init__(self, site_id: int, reports: Path) -> None:
        self.site_id, self.reports = site_id, reports
        self.store = IncidentStore(memory_of())

    def run(self) -> tuple[int, Summary, str]:
        result = CliRunner().invoke(app, ["nightly", "--sites", str(self.site_id), "--report-dir", str(self.reports)])
        [line] = [line for line in result.output.splitlines() if line.startswith("summary: ")]
        summary = Summary.read(Path(line.removeprefix("summary: ")))
        operator = (self.reports / summary.run_id / "report" / "operator.txt").read_text()
        return result.exit_code, summary, operator

    def alerts(self, kind: str, run_id: str) -> list[email.message.EmailMessage]:
        return [email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
                for path in (self.reports / "alerts").glob(f"{kind}-{run_id}-*.eml")]

    def a_day_passes(self, days: int) -> None:
        """The nights below run later: the open incidents were opened (and alerted about) `days` earlier."""
        for incident in self.store.open_incidents():
            self.store.save(incident.model_copy(update={"opened_at": incident.opened_at - timedelta(days=days),
                                                        "alerted_on": incident.opened_at.date() - timedelta(days)}))


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_a_site_dead_at_load_stays_an_incident_until_its_repair_is_checked(dashboard, tmp_path: Path):
    emulator = dashboard(sites=12, seed=4)
    site, bad = site_with_an_active_plugin_update(emulator.truth())
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": bad, "mode": "load"})
    nights = Nights(site["id"], tmp_path / "reports")
    folder = f"wp-content/plugins/{bad.split('/')[0]}"

    code, first, _ = nights.run()  # the night that breaks it: alerted at once, an incident opened

    assert code == 7
    [alarm] = first.broken
    assert alarm.containment.status is ContainmentStatus.unreachable
    [alert] = nights.alerts("break", first.run_id)
    text = alert.get_body(("plain",)).get_content()
    from_version = next(i.from_version for i in first.items if i.slug == bad)
    assert site["url"].rstrip("/") in text and folder in text and f"restore version {from_version}" in text
    assert f"managesites&dashboard={site['id']}" in text
    [incident] = nights.store.open_incidents()
    assert (incident.site_id, incident.opened_by, incident.status, incident.down) == (
        site["id"], first.run_id, "unreachable", True)
    assert [i.id for i in first.incidents] == [incident.id]

    nights.a_day_passes(2)
    code, second, operator = nights.run()  # still down: exit 8, the report leads with it, alerted again

    assert code == 8
    assert operator.index("1 OPEN INCIDENT: 1 SITE DOWN") < operator.index("Numbers")
    assert f"incident {incident.id}: {alarm.site_name} ({site['url']}): down, unreachable by the dashboard, " \
           f"open 2 days" in operator
    assert folder in operator and "fleet incidents close" in operator
    [again] = nights.alerts("still-down", second.run_id)
    assert "still down, 2 days after run" in again["subject"] and alarm.site_name in again["subject"]
    body = again.get_body(("plain",)).get_content()
    assert folder in body and f"restore version {from_version}" in body and site["url"] in body
    [reviewed] = second.incidents
    assert reviewed.id == incident.id and reviewed.is_open and reviewed.down

    code, third, operator = nights.run()  # the same day: still exit 8 and in the report, not alerted twice a day
    assert code == 8 and "open 2 days" in operator
    assert nights.alerts("still-down", third.run_id) == []
    assert cli("incidents", "list", "--state-db", str(nights.store.path))[1].startswith(
        f"incident {incident.id}: {alarm.site_name}")

    emulator.post("sites/repair", {"site_id": site["id"]})  # the operator renames the plugin's folder
    code, fourth, operator = nights.run()

    assert code == 0
    [closed] = fourth.incidents
    assert not closed.is_open and closed.closed_by == fourth.run_id and "a check passed" in closed.close_reason
    assert f"Incident {incident.id} closed tonight" in operator and "OPEN INCIDENT" not in operator
    assert nights.store.open_incidents() == []
    code, _, operator = nights.run()  # and it is gone from the next night's report
    assert code == 0 and f"Incident {incident.id}" not in operator


def test_the_operator_closes_an_incident_with_a_reason(dashboard, tmp_path: Path):
    emulator = dashboard(sites=12, seed=4)
    site, bad = site_with_an_active_plugin_update(emulator.truth())
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": bad, "mode": "load"})
    nights = Nights(site["id"], tmp_path / "reports")
    assert nights.run()[0] == 7
    [incident] = nights.store.open_incidents()
    state_db = str(nights.store.path)

    code, shown = cli("incidents", "show", str(incident.id), "--state-db", state_db)
    assert code == 0 and "down, unreachable by the dashboard" in shown and bad in shown
    assert cli("incidents", "close", str(incident.id), "--state-db", state_db, "--reason", " ")[0] == 2
    code, said = cli("incidents", "close", str(incident.id), "--state-db", state_db, "--reason",
                     "site retired; the client moves it elsewhere")
    assert code == 0 and f"closed incident {incident.id}" in said
    assert cli("incidents", "close", str(incident.id), "--state-db", state_db, "--reason", "again")[0] == 2
    assert "site retired" in cli("incidents", "show", str(incident.id), "--state-db", state_db)[1]

    code, second, operator = nights.run()  # the site is still down, and no longer an incident: not exit 8; but
    # it was the night's only site, and a night that synced no site did nothing (exit 9, issue 29)
    assert code == 9 and "synced none of the 1 site it had to sync" in (second.did_nothing or "")
    assert second.incidents == [] and "INCIDENT" not in operator
    assert cli("incidents", "list", "--state-db", state_db)[1].startswith("no open incident")


def two_sites_with(truth: dict) -> tuple[str, dict, dict]:
    """An active plugin with an update pending on a healthy connected site, and a second such site having it."""
    sites = [s for s in truth["sites"].values() if s["status"] == "connected" and s["reachable"]]
    for site in sites:
        for update in site["pending_updates"]:
            slug = update["slug"]
            if update["type"] != "plugin" or not site["plugins"][slug]["active"]:
                continue
            other = next((s for s in sites if s["id"] != site["id"] and slug in s["plugins"]
                          and s["plugins"][slug]["active"]), None)
            if other is not None:
                return slug, site, other
    raise AssertionError("no plugin on two sites")


def newer(version: str) -> str:
    return f"{int(version.split('.')[0]) + 1}.0.0"


@pytest.mark.parametrize("fix", ["good", "bad"])
def test_a_contained_site_takes_the_way_back_when_a_fixed_release_is_offered(dashboard, tmp_path: Path, fix: str):
    emulator = dashboard(sites=12, seed=4)
    slug, site, other = two_sites_with(emulator.truth())
    emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": slug, "mode": "break"})
    nights = Nights(site["id"], tmp_path / "reports")

    code, first, _ = nights.run()  # the release breaks the site: its culprit found and left deactivated
    assert code == 7
    [incident] = nights.store.open_incidents()
    assert (incident.status, incident.deactivated, incident.down) == ("contained", [slug], False)
    bad = incident.culprit.to_version

    code, second, operator = nights.run()  # no fixed release yet: up, still an open incident, in the report
    assert code == 0, "a site that answers is not down"
    assert f"incident {incident.id}: " in operator and f"up, with {incident.culprit.name} still deactivated" in operator
    assert emulator.truth()["sites"][str(site["id"])]["plugins"][slug]["active"] is False

    release = newer(bad)
    for where in (site, other):  # the fixed release is offered to the contained site, and to another
        emulator.post("offers", {"site_id": where["id"], "type": "plugin", "slug": slug, "version": release})
    if fix == "bad":  # the "fix" breaks the site again
        emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": slug, "mode": "break"})
    nights.site_id = f"{site['id']},{other['id']}"
    code, third, operator = nights.run()

    after = emulator.truth()["sites"][str(site["id"])]
    assert after["plugins"][slug]["version"] == release  # installed on the contained site
    [tried] = [item for item in third.items if (item.site_id, item.slug) == (site["id"], slug)]
    assert tried.outcome.value == "updated" and tried.to_version == release
    [reviewed] = [i for i in third.incidents if i.id == incident.id]
    spared = next(item for item in third.items if (item.site_id, item.slug) == (other["id"], slug))
    if fix == "good":
        assert code == 0
        assert after["plugins"][slug]["active"] is True and after["front_end"]["broken"] is False
        assert not reviewed.is_open and "a check passed" in reviewed.close_reason
        assert f"Incident {incident.id} closed tonight" in operator
        assert spared.outcome.value == "updated"  # healthy on the way back: the release goes on as usual
    else:
        assert code == 7
        assert after["plugins"][slug]["active"] is False and after["front_end"]["broken"] is False  # off again
        assert reviewed.is_open and reviewed.deactivated == [slug] and reviewed.culprit.to_version == release
        assert first.run_id in reviewed.done and third.run_id in reviewed.done
        assert (slug, release) in {(h.slug, h.version) for h in third.holds}  # that release held too
        assert spared.outcome.value == "held" and f"version {release} broke" in spared.reason  # not sent on
        assert emulator.truth()["sites"][str(other["id"])]["plugins"][slug]["version"] != release
