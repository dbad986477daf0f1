"""A night that breaks a site: an incident with suspects, a Failed flow run, the client's e-mail held for review,
and the bad version held fleet-wide the next night. Over real HTTP against the emulator."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import app
from fleet.model.summary import Outcome, Selection, Summary
from fleet.model.vocabulary import count
from fleet.rules.breakage import SitesBrokenByRun
from fleet.state.holds import HoldStore
from flows.nightly import nightly_maintenance
from tests.pipeline.conftest import memory_of

pytestmark = pytest.mark.usefixtures("prefect_harness")


def shared_plugin(truth: dict) -> tuple[str, str, list[dict]]:
    """A plugin version offered to several healthy connected sites: (slug, version, the sites)."""
    sites = [s for s in truth["sites"].values() if s["status"] == "connected" and s["reachable"]]
    offered = Counter((u["slug"], u["new_version"]) for s in sites for u in s["pending_updates"]
                      if u["type"] == "plugin")
    (slug, version), _ = offered.most_common(1)[0]
    return slug, version, [s for s in sites if any(u["slug"] == slug for u in s["pending_updates"])]


async def test_a_night_that_breaks_a_site_fails_names_suspects_holds_mail_and_version(
    dashboard, monkeypatch, tmp_path: Path
):
    emulator = dashboard(sites=12, seed=4)
    monkeypatch.setenv("FLEET_REPORT_TO", "ops@example.com")
    truth = emulator.truth()
    slug, version, offering = shared_plugin(truth)
    victim, later = offering[0], offering[1]
    down = next(s for s in truth["sites"].values() if s["status"] == "connected" and s["reachable"]
                and s["pending_updates"] and s["id"] not in {victim["id"], later["id"]})
    emulator.post("faults/items", {"site_id": victim["id"], "type": "plugin", "slug": slug, "mode": "break"})
    emulator.post("faults/front-end", {"site_id": down["id"], "broken": True})  # down before the night

    state = await nightly_maintenance(selection=Selection(sites=[str(victim["id"]), str(down["id"])]),
                                      return_state=True)

    assert state.is_failed()
    error = await state.result(raise_on_failure=False)
    assert isinstance(error, SitesBrokenByRun)
    summary = Summary.read(Path(error.summary_path))
    victim_name = next(site.site_name for site in summary.sites if site.site_id == victim["id"])
    assert victim_name in state.message and "broke 1 site" in state.message
    [broken] = summary.broken
    assert broken.site_id == victim["id"] and "critical error" in broken.saw and "HTTP 500" in broken.saw
    assert broken.dashboard_page.endswith(f"/wp-admin/admin.php?page=managesites&dashboard={victim['id']}")
    suspect = next(s for s in broken.suspects if s.slug == slug)
    assert suspect.to_version == version and suspect.from_version and suspect.outcome is Outcome.updated
    flagged = [item for item in summary.items if item.suspect]
    assert flagged and {item.site_id for item in flagged} == {victim["id"]}
    assert {item.outcome for item in flagged} == {Outcome.updated}  # they were updated, and are flagged
    assert [alarm.site_id for alarm in summary.already_down] == [down["id"]]
    assert "critical error" in summary.already_down[0].saw

    # the client whose site broke is not mailed: the operator gets the report, marked for review
    client = broken.client
    assert client, "the emulated sites belong to clients"
    held = [d for d in summary.deliveries if d.report == client and d.held]
    assert held and "fleet report" in held[0].answer and "--client" in held[0].answer
    assert not [d for d in summary.deliveries if d.report == client and not d.held
                and d.recipient != "ops@example.com"]
    eml = Path(error.summary_path).parent / next(d.eml_path for d in summary.deliveries
                                                  if d.report == client and d.eml_path)
    assert "[held for review]" in eml.read_text() and "ops@example.com" in eml.read_text()

    # the report leads with it
    html = (Path(error.summary_path).parent / "report" / "operator.html").read_text()
    assert html.index("broke") < html.index("Updated")
    assert victim_name in html and version in html and "managesites" in html

    # the version is held fleet-wide: the next night does not apply it to another site
    holds = HoldStore(memory_of()).active()  # every suspect: which one broke it is not known
    assert {(hold.slug, hold.version) for hold in holds} == {
        (s.slug, s.to_version) for s in broken.suspects if s.outcome is Outcome.updated}
    assert all(victim_name in hold.reason for hold in holds)
    second = await nightly_maintenance(selection=Selection(sites=[str(later["id"])]))
    night = Summary.read(Path(second))
    [item] = [item for item in night.items if item.slug == slug]
    assert item.outcome is Outcome.held and item.rule == "night_hold" and "fleet holds release" in item.reason
    assert {h.slug for h in night.holds} == {h.slug for h in holds}
    truth = emulator.truth()
    assert any(u["slug"] == slug for u in truth["sites"][str(later["id"])]["pending_updates"])

    # the operator sees the holds and releases one: the night after applies it again
    listed = CliRunner().invoke(app, ["holds", "list"])
    assert listed.exit_code == 0 and version in listed.output and f"{count(len(holds), 'hold')};" in listed.output
    released = CliRunner().invoke(app, ["holds", "release", f"plugin:{slug}"])
    assert released.exit_code == 0 and f"released plugin:{slug}@{version}" in released.output
    assert CliRunner().invoke(app, ["holds", "release", f"plugin:{slug}"]).exit_code == 2  # nothing left to release
    third = Summary.read(Path(await nightly_maintenance(selection=Selection(sites=[str(later["id"])]))))
    assert [item.outcome for item in third.items if item.slug == slug] == [Outcome.updated]


@pytest.mark.long(18)
def test_fleet_nightly_exits_7_naming_the_broken_site_and_prints_the_summary(dashboard, tmp_path: Path):
    emulator = dashboard(sites=12, seed=4)
    slug, _, offering = shared_plugin(emulator.truth())
    victim = offering[0]
    emulator.post("faults/items", {"site_id": victim["id"], "type": "plugin", "slug": slug, "mode": "break"})
    result = CliRunner().invoke(app, ["nightly", "--sites", str(victim["id"]), "--report-dir", str(tmp_path)])
    assert result.exit_code == 7, result.output
    assert "Traceback" not in result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("nightly run failed: ")]
    assert "broke 1 site:" in line
    [summary_line] = [line for line in result.output.splitlines() if line.startswith("summary: ")]
    summary = Summary.read(Path(summary_line.removeprefix("summary: ")))
    assert [alarm.site_id for alarm in summary.broken] == [victim["id"]]
    assert summary.broken[0].site_name in line


async def test_a_fatal_at_load_is_kept_as_evidence_and_the_repaired_site_is_maintained_again(dashboard, tmp_path: Path):
    """The harder bad release: the update is answered `updated`, then the site's pages AND its MainWP Child die, the
    night's own check marks the site known offline (the dashboard refuses it from then on), the answer is kept as
    the evidence; once repaired, the next night checks the refused site, finds it answering and maintains it."""
    emulator = dashboard(sites=12, seed=4)
    truth = emulator.truth()
    slug, version, offering = shared_plugin(truth)
    victim = next(site for site in offering if site["plugins"][slug]["active"])
    emulator.post("faults/items", {"site_id": victim["id"], "type": "plugin", "slug": slug, "mode": "load"})
    selection = Selection(sites=[str(victim["id"])])

    state = await nightly_maintenance(selection=selection, report_dir=str(tmp_path / "first"), return_state=True)

    assert state.is_failed()
    summary = Summary.read(Path((await state.result(raise_on_failure=False)).summary_path))
    [broken] = summary.broken
    assert broken.site_id == victim["id"] and "HTTP 500" in broken.saw
    after = emulator.truth()["sites"][str(victim["id"])]
    assert after["front_end"] == {"status": "broken", "broken": True, "broken_by": None, "dead_at_load": True,
                                  "fatal_by": f"plugin:{slug}"}
    assert after["plugins"][slug]["version"] == version  # installed: the dashboard answered it updated
    assert after["offline_check_result"] == -1  # the night's own check: known offline from now on
    item = next(item for item in summary.items if item.slug == slug)  # the answer is the only evidence left
    assert item.outcome is Outcome.updated and item.to_version == version and "not verified" in item.reason
    reports = tmp_path / "first" / summary.run_id / "report"
    client = next(path for path in reports.glob("client-*.txt") if broken.site_url in path.read_text())
    for path in (reports / "operator.txt", client):  # every format says it, with the reason, for both readers
        for report in (path, path.with_suffix(".md"), path.with_suffix(".html")):
            text = report.read_text()
            assert "Updated, not verified" in text, report.name
            assert ("the site stopped answering it" if report.parent / "operator.txt" == path
                    else "the website stopped answering our checks") in text, report.name
    operator = (reports / "operator.txt").read_text()
    [health] = [line for line in operator.splitlines() if line.startswith(f"  - {broken.site_name} (")]
    assert "down, unreachable by the dashboard, HTTP 500" in health and "online" not in health  # a dead child
    assert "POST " in operator and not re.search(r"(POST \S+): \1", operator)  # an error names its call once

    emulator.post("sites/repair", {"site_id": victim["id"]})  # the operator renames the plugin's folder
    assert emulator.truth()["sites"][str(victim["id"])]["offline_check_result"] == -1  # still refused by the dashboard
    second = Summary.read(Path(await nightly_maintenance(selection=selection, report_dir=str(tmp_path / "second"))))
    [site] = second.sites
    assert site.status == "online" and site.revived  # checked once, answering: synced and maintained again
    assert not [item for item in second.items if item.outcome is Outcome.skipped]
    assert [item for item in second.items if item.outcome is Outcome.updated]


async def test_a_site_a_night_could_not_sync_is_reconnected_once_it_answers_and_maintained_again(dashboard, tmp_path):
    """Found on the real MainWP lab: a site down when a night syncs it has its MainWP Child version recorded as 0
    (MainWP's failed sync), and the dashboard then refuses every sync of it as "child outdated", even once it
    answers again: it was skipped as "child too old" night after night. The next night reconnects it."""
    emulator = dashboard(sites=12, seed=4)
    site, other = [site for site in emulator.truth()["sites"].values() if site["status"] == "connected"
                   and site["reachable"] and site["pending_updates"] and site["child_version"] >= "4"][:2]
    selection = Selection(sites=[str(site["id"]), str(other["id"])])  # a night that syncs nothing fails
    emulator.post("faults/reachable", {"site_id": site["id"], "reachable": False})
    first = Summary.read(Path(await nightly_maintenance(selection=selection, report_dir=str(tmp_path / "first"),
                                                        send_report=False)))
    assert {row.site_id: row.status for row in first.sites} == {site["id"]: "disconnected", other["id"]: "online"}
    assert emulator.truth()["sites"][str(site["id"])]["synced_child_version"] == "0"

    emulator.post("faults/reachable", {"site_id": site["id"], "reachable": True})  # its host is back
    second = Summary.read(Path(await nightly_maintenance(selection=selection, report_dir=str(tmp_path / "second"),
                                                         send_report=False)))
    [row] = [row for row in second.sites if row.site_id == site["id"]]
    assert row.status == "online" and row.revived, row
    mine = [item for item in second.items if item.site_id == site["id"]]
    assert any(item.outcome is Outcome.updated for item in mine)
    assert not [item for item in mine if item.outcome is Outcome.skipped]
    assert emulator.truth()["sites"][str(site["id"])]["synced_child_version"] == site["child_version"]


async def test_a_version_that_broke_a_site_is_not_sent_again_tonight_nor_anything_more_to_that_site(
    dashboard, tmp_path: Path
):
    emulator = dashboard(sites=12, seed=4)
    truth = emulator.truth()
    slug, version, offering = shared_plugin(truth)
    active = [site for site in offering if site["plugins"][slug]["active"]]
    victim, later = active[0], active[1]
    emulator.post("faults/items", {"site_id": victim["id"], "type": "plugin", "slug": slug, "mode": "break"})
    policy = tmp_path / "policy.yaml"  # the victim first, the other site in a later cohort of the same night
    policy.write_text(f'rollout:\n  cohorts: ["site:{victim["id"]}", "rest"]\n  failure_budget: 10\n')

    state = await nightly_maintenance(selection=Selection(sites=[str(victim["id"]), str(later["id"])]),
                                      policy_file=str(policy), report_dir=str(tmp_path / "r"), return_state=True)

    summary = Summary.read(Path((await state.result(raise_on_failure=False)).summary_path))
    [broken] = summary.broken
    assert broken.site_id == victim["id"]
    by_site = {(item.site_id, item.slug): item for item in summary.items}
    spared = by_site[(later["id"], slug)]
    assert spared.outcome is Outcome.held and f"broke {broken.site_name}" in spared.reason  # not sent to the next site
    assert emulator.truth()["sites"][str(later["id"])]["plugins"][slug]["version"] != version
    after_break = [item for item in summary.items if item.site_id == victim["id"] and item.type.value in
                   ("theme", "core")]  # the steps after the plugins' step
    assert all(item.outcome is Outcome.held and "nothing more was sent" in item.reason for item in after_break)


async def test_a_version_that_broke_a_site_goes_to_no_later_lane_of_the_same_cohort(dashboard, monkeypatch,
                                                                                   tmp_path: Path):
    emulator = dashboard(sites=12, seed=4)
    slug, version, offering = shared_plugin(emulator.truth())
    bad = [site for site in offering if site["plugins"][slug]["active"]
           and any(u["slug"] == slug and u["new_version"] == version for u in site["pending_updates"])]
    first = bad[0]
    second = next(site for site in bad if site["ip"] != first["ip"])  # two servers: two lanes, not one call
    for site in (first, second):  # the release is bad on both: whichever lane runs first breaks
        emulator.post("faults/items", {"site_id": site["id"], "type": "plugin", "slug": slug, "mode": "break"})
    monkeypatch.setenv("FLEET_CHUNK_SIZE", "1")  # a lane per site (per server), one lane after another
    monkeypatch.setenv("FLEET_CONCURRENCY", "1")

    state = await nightly_maintenance(selection=Selection(sites=[str(first["id"]), str(second["id"])]),
                                      report_dir=str(tmp_path / "r"), return_state=True)

    summary = Summary.read(Path((await state.result(raise_on_failure=False)).summary_path))
    [broken] = summary.broken
    assert {c.name for c in summary.cohorts} <= {"all"}  # one cohort: the lanes alone kept the version back
    spared_id = second["id"] if broken.site_id == first["id"] else first["id"]
    spared = next(item for item in summary.items if (item.site_id, item.slug) == (spared_id, slug))
    assert spared.outcome is Outcome.held and f"version {version} broke {broken.site_name}" in spared.reason
    assert emulator.truth()["sites"][str(spared_id)]["plugins"][slug]["version"] != version
