"""Suspects re-tested: a good release applied in the same step as a release fatal at load (nothing can be bisected
on a dead child) is held as a suspect; once the repaired site shows which plugin was the culprit, the suspect is
tried on one site alone, and released when that site stays healthy. Nights through `fleet nightly` against the
emulator over a real socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.summary import HoldKind, Outcome
from tests.pipeline.test_lab_sequences import Lab, sites_sharing_a_plugin

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_a_suspect_is_tried_on_one_site_once_its_breaks_culprit_is_known_then_released(dashboard, tmp_path: Path):
    lab = Lab(emulator := dashboard(sites=12, seed=4), tmp_path / "reports")
    good, (site, first, second) = sites_sharing_a_plugin(emulator.truth(), count=3)
    bad = next(slug for slug, plugin in site["plugins"].items() if plugin["active"] and slug != good)
    lab.offer(site, bad, "99.3.0", fault="load")
    for where in (site, first, second):
        lab.offer(where, good, "99.7.0")

    code, broke, _ = lab.night(site["id"])  # dead at load: every plugin of the step is a suspect
    assert code == 7
    kinds = {(h.slug, h.version): h.kind for h in lab.holds.active()}
    assert kinds[(bad, "99.3.0")] is HoldKind.suspect and kinds[(good, "99.7.0")] is HoldKind.suspect

    lab.emulator.post("sites/repair", {"site_id": site["id"]})  # the operator renames the culprit's folder
    lab.night(site["id"], first["id"], second["id"])  # the repaired site is up: its incident learns the culprit
    [incident] = lab.incidents.listed(include_closed=True)
    assert incident.culprit is not None and (incident.culprit.slug, incident.culprit.to_version) == (bad, "99.3.0")

    code, canary, _ = lab.night(first["id"], second["id"])  # the suspect on one site alone, held on the other
    outcomes = {i.site_id: i.outcome for i in canary.items if i.slug == good}
    assert outcomes == {first["id"]: Outcome.updated, second["id"]: Outcome.held} or outcomes == {
        first["id"]: Outcome.held, second["id"]: Outcome.updated}
    active = {(h.slug, h.version): h.kind for h in lab.holds.active()}
    assert (good, "99.7.0") not in active, "the canary stayed healthy: released"
    assert active[(bad, "99.3.0")] is HoldKind.culprit

    lab.night(first["id"], second["id"])  # then it goes on as usual
    assert {lab.plugin(s, good)["version"] for s in (first, second)} == {"99.7.0"}
