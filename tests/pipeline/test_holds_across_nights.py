"""A held version stays held while any site is still offered it, and a quiet night does not end it: the lab's
sequence over nights against one emulator and one state database (1.3 broke a site and is held; 1.4 is offered to,
and installed on, one site; 1.3 is still offered to another, which never gets it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.model.summary import Outcome, Selection, Summary
from fleet.state.holds import HoldStore
from flows.nightly import nightly_maintenance
from tests.pipeline.conftest import memory_of

pytestmark = pytest.mark.usefixtures("prefect_harness")


async def night(tmp_path: Path, *site_ids: int) -> Summary:
    """One night over the sites (none named: the whole fleet); every night shares the report directory."""
    state = await nightly_maintenance(selection=Selection(sites=[str(i) for i in site_ids]),
                                      report_dir=str(tmp_path / "reports"), return_state=True)
    result = await state.result(raise_on_failure=False)
    return Summary.read(Path(result if isinstance(result, str) else result.summary_path))


def three_sites_with(truth: dict) -> tuple[str, list[dict]]:
    """An active plugin that three healthy connected sites have installed, and those sites."""
    sites = [s for s in truth["sites"].values() if s["status"] == "connected" and s["reachable"]]
    for slug in sorted({slug for site in sites for slug in site["plugins"]}):
        having = [site for site in sites if slug in site["plugins"] and site["plugins"][slug]["active"]]
        if len(having) >= 3:
            return slug, having[:3]
    raise AssertionError("no plugin on three sites")


async def test_a_held_version_is_never_sent_again_while_any_site_is_offered_it(dashboard, tmp_path: Path):
    emulator = dashboard(sites=5, seed=4)
    slug, (broken, ahead, behind) = three_sites_with(emulator.truth())
    for site in (broken, behind):
        emulator.post("offers", {"site_id": site["id"], "type": "plugin", "slug": slug, "version": "99.3.0"})
    emulator.post("faults/items", {"site_id": broken["id"], "type": "plugin", "slug": slug, "mode": "break"})
    holds = HoldStore(memory_of())

    first = await night(tmp_path, broken["id"])  # 1.3 breaks a site: contained, and held
    assert [alarm.site_id for alarm in first.broken] == [broken["id"]]
    assert ("plugin", slug, "99.3.0") in {(h.type.value, h.slug, h.version) for h in holds.active()}

    emulator.post("offers", {"site_id": ahead["id"], "type": "plugin", "slug": slug, "version": "99.4.0"})
    second = await night(tmp_path)  # the whole fleet: 1.4 installed on one site, 1.3 still offered to another
    third = await night(tmp_path)

    versions = {(item.site_id, item.to_version): item for item in second.items + third.items if item.slug == slug}
    assert versions[(ahead["id"], "99.4.0")].outcome is Outcome.updated
    for summary in (second, third):
        [spared] = [item for item in summary.items if item.slug == slug and item.site_id == behind["id"]]
        assert spared.outcome is Outcome.held and spared.rule == "night_hold" and spared.to_version == "99.3.0"
    assert emulator.truth()["sites"][str(behind["id"])]["plugins"][slug]["version"] != "99.3.0"
    assert "99.3.0" in {h.version for h in holds.active() if h.slug == slug}

    emulator.post("offers", {"site_id": behind["id"], "type": "plugin", "slug": slug, "version": "99.4.0"})
    fourth = await night(tmp_path)  # no site is offered 1.3 any more: one quiet night proves nothing, 1.4 goes on
    [kept] = [h for h in holds.active() if h.slug == slug and h.version == "99.3.0"]
    assert kept.quiet_days == 1 and "29 more days" in kept.ends
    [fixed] = [item for item in fourth.items if item.slug == slug and item.site_id == behind["id"]]
    assert (fixed.outcome, fixed.to_version) == (Outcome.updated, "99.4.0")
