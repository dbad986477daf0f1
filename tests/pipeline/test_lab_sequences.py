"""The three sequences the real lab (MainWP 6.1.2, real child sites, one plugin in six releases) broke the promise
in, each over nights through `fleet nightly` against one emulator and one state database, over a real socket:
(a) a quiet night between a break and a lagging site's offer; (b) a way-back release fatal when switched on, then
offered to a second site; (c) a repaired site broken again by a different release."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import HoldKind, Outcome, Summary
from fleet.state.holds import HoldStore
from fleet.state.incidents import IncidentStore
from tests.pipeline.conftest import memory_of

pytestmark = pytest.mark.usefixtures("prefect_harness")


class Lab:
    """`fleet nightly` night after night (over the sites named, or the whole fleet), one report directory."""

    def __init__(self, emulator, reports: Path) -> None:
        self.emulator, self.reports = emulator, reports
        state = memory_of()
        self.holds, self.incidents = HoldStore(state), IncidentStore(state)

    def night(self, *site_ids: int) -> tuple[int, Summary, str]:
        args = ["nightly", "--report-dir", str(self.reports)]
        if site_ids:
            args += ["--sites", ",".join(map(str, site_ids))]
        result = CliRunner().invoke(app, args)
        [line] = [line for line in result.output.splitlines() if line.startswith("summary: ")]
        summary = Summary.read(Path(line.removeprefix("summary: ")))
        return result.exit_code, summary, (self.reports / summary.run_id / "report" / "operator.txt").read_text()

    def offer(self, site: dict, slug: str, version: str, fault: str | None = None) -> None:
        self.emulator.post("offers", {"site_id": site["id"], "type": "plugin", "slug": slug, "version": version})
        if fault:
            self.emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": slug, "mode": fault})

    def plugin(self, site: dict, slug: str) -> dict:
        return self.emulator.truth()["sites"][str(site["id"])]["plugins"][slug]

    def site(self, site: dict) -> dict:
        return self.emulator.truth()["sites"][str(site["id"])]

    def held(self) -> set[tuple[str, str]]:
        return {(hold.slug, hold.version) for hold in self.holds.active()}


def sites_sharing_a_plugin(truth: dict, count: int = 2) -> tuple[str, list[dict]]:
    """An active plugin that `count` healthy connected sites have, and those sites."""
    sites = [s for s in truth["sites"].values() if s["status"] == "connected" and s["reachable"]]
    for slug in sorted({slug for site in sites for slug in site["plugins"]}):
        having = [site for site in sites if slug in site["plugins"] and site["plugins"][slug]["active"]]
        if len(having) >= count:
            return slug, having[:count]
    raise AssertionError(f"no plugin on {count} sites")


def test_a_quiet_night_between_a_break_and_a_lagging_sites_offer_ends_no_hold(dashboard, tmp_path: Path):
    lab = Lab(emulator := dashboard(sites=5, seed=4), tmp_path / "reports")
    slug, (first, lagging) = sites_sharing_a_plugin(emulator.truth())
    lab.offer(first, slug, "99.3.0", fault="break")

    code, broke, _ = lab.night()  # 1.3 breaks the first site: contained, held
    assert code == 7 and [alarm.site_id for alarm in broke.broken] == [first["id"]]
    assert (slug, "99.3.0") in lab.held()

    lab.night()  # nobody is offered 1.3 tonight: a quiet night proves nothing
    [hold] = [h for h in lab.holds.active() if (h.slug, h.version) == (slug, "99.3.0")]
    assert hold.kind is HoldKind.culprit and "incident" in hold.ends
    listed = CliRunner().invoke(app, ["holds", "list", "--state-db", str(lab.holds.path)]).output
    assert f"{slug}@99.3.0" in listed and "held as a culprit" in listed and "until: ends once incident" in listed

    lab.offer(lagging, slug, "99.3.0", fault="break")  # the lagging site's own 12-hour clock offers it now
    code, later, operator = lab.night()

    [spared] = [i for i in later.items if (i.site_id, i.slug) == (lagging["id"], slug)]
    assert spared.outcome is Outcome.held and spared.rule == "night_hold"
    assert lab.plugin(lagging, slug)["version"] != "99.3.0" and lab.site(lagging)["front_end"]["broken"] is False
    assert lagging["id"] not in {alarm.site_id for alarm in later.broken}
    assert "99.3.0" in operator and "held as a culprit" in operator  # the report reads the store


def test_a_way_back_release_fatal_when_switched_on_is_a_break_and_goes_nowhere_else(dashboard, tmp_path: Path):
    lab = Lab(emulator := dashboard(sites=12, seed=4), tmp_path / "reports")
    slug, (site, second) = sites_sharing_a_plugin(emulator.truth())
    worked = lab.plugin(site, slug)["version"]  # the version that last worked on the site
    lab.offer(site, slug, "99.3.0", fault="break")
    code, _, _ = lab.night(site["id"])  # 1.3: a front-end fatal, contained (deactivated), an open incident
    assert code == 7 and lab.plugin(site, slug)["active"] is False
    [incident] = lab.incidents.open_incidents()

    lab.offer(site, slug, "99.6.0", fault="load")  # the "fixed" 1.6 is itself fatal at load
    code, way_back, operator = lab.night(site["id"])

    assert code == 7, "a way back that fails is a break: the night is not green"
    assert lab.plugin(site, slug) == {**lab.plugin(site, slug), "version": "99.6.0", "active": False}
    assert lab.site(site)["front_end"]["status"] == "up"  # switched off, its code does not load: the pages stay up
    [alarm] = way_back.broken
    assert alarm.site_id == site["id"] and alarm.containment.culprit.to_version == "99.6.0"
    assert "NOMAINWP" in alarm.saw
    [tried] = [i for i in way_back.items if (i.site_id, i.slug) == (site["id"], slug)]
    assert tried.suspect, "not a healthy update"
    assert tried.outcome is Outcome.not_switched_on, "a release that never ran is not an update"
    assert way_back.counts.by_outcome.get(Outcome.updated, 0) == 0
    assert way_back.counts.by_outcome[Outcome.not_switched_on] == 1
    assert "Not switched on (1)" in operator and "Updated (1)" not in operator
    assert "The checked site is healthy" not in operator, "a report that says a site broke"
    assert (slug, "99.6.0") in lab.held()
    [told] = [i for i in way_back.incidents if i.id == incident.id]
    assert told.is_open and told.culprit.to_version == "99.6.0" and told.deactivated == [slug]
    assert way_back.run_id in told.done and "never ran" in told.done and "NOMAINWP" in told.saw
    # the advice names the version that last worked, never the held one that broke the site the night before
    for said in (told.next_steps, alarm.containment.next_steps, operator):
        assert f"restore version {worked}" in said and "restore version 99.3.0" not in said
    assert alarm.saw.count("NOMAINWP") == 1 and told.saw.count("NOMAINWP") == 1, "a reason is said once"

    lab.offer(second, slug, "99.6.0", fault="load")  # then offered to a second site as its ordinary update
    code, after, _ = lab.night(second["id"])
    [spared] = [i for i in after.items if (i.site_id, i.slug) == (second["id"], slug)]
    assert spared.outcome is Outcome.held and spared.rule == "night_hold"
    assert lab.plugin(second, slug)["version"] != "99.6.0" and lab.site(second)["front_end"]["status"] == "up"


def test_a_repaired_site_broken_again_by_another_release_is_told_with_that_breaks_facts(dashboard, tmp_path: Path):
    lab = Lab(emulator := dashboard(sites=12, seed=4), tmp_path / "reports")
    slug, (site,) = sites_sharing_a_plugin(emulator.truth(), count=1)
    lab.offer(site, slug, "99.4.0", fault="break")
    code, _, _ = lab.night(site["id"])  # 1.4 breaks it: contained, 1.4 deactivated
    assert code == 7
    [incident] = lab.incidents.open_incidents()
    assert incident.culprit.to_version == "99.4.0" and incident.deactivated == [slug]

    # repaired by hand: the operator puts a good copy back and switches it on again
    emulator.post("faults/front-end", {"site_id": site["id"], "broken": False})
    key = emulator.server.credentials["api_keys"]["read_write"]
    emulator.http.post(f"/wp-json/{emulator.server.config.namespace}/v2/sites/{site['id']}/plugins/activate",
                       params={"slug": slug}, headers={"Authorization": f"Bearer {key}"}).raise_for_status()
    assert lab.plugin(site, slug)["active"] is True and lab.site(site)["front_end"]["status"] == "up"
    lab.offer(site, slug, "99.2.0", fault="load")  # then 1.2, fatal at load, reaches it
    code, again, operator = lab.night(site["id"])

    assert code == 7
    [told] = [i for i in again.incidents if i.id == incident.id]
    assert told.is_open and told.down and told.status == "unreachable"
    assert told.culprit is None or told.culprit.to_version == "99.2.0", "never the old break's culprit"
    assert [(s.slug, s.to_version) for s in told.suspects] == [(slug, "99.2.0")]
    assert told.deactivated == [], f"{slug} is active on disk at 99.2.0, not deactivated"
    assert lab.plugin(site, slug) == {**lab.plugin(site, slug), "version": "99.2.0", "active": True}
    assert "99.4.0" in told.done  # the earlier break stays in its history
    assert "still deactivated" not in operator.split("Versions held")[0]
