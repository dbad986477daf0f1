"""MainWP's memory of versions WordPress rolled back is failed-elsewhere evidence: the night sends such a version
to no site, and each site that remembers it counts towards holding it. Over real HTTP against the emulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard import DashboardClient
from dashboard.models import UpdateType, rolled_back_updates
from fleet.model.summary import Outcome, Selection, Summary
from fleet.state.holds import HoldStore
from flows.update import update_fleet
from tests.pipeline.conftest import memory_of, read_run
from tests.pipeline.test_broken_night import shared_plugin


def test_the_update_detail_is_read_whatever_its_shape() -> None:
    detail = {"plugins": [], "rollback_plugins": {"forms/forms.php": {
        "name": "Forms", "old_version": "1.0", "version": "1.2", "created": 1700000000}},
        "rollback_themes": [], "translations": []}
    [found] = rolled_back_updates(detail)
    assert (found.type, found.slug, found.version, found.old_version) == (UpdateType.plugin, "forms/forms.php", "1.2",
                                                                          "1.0")
    assert rolled_back_updates({"rollback_plugins": "odd"}) == [] and rolled_back_updates(None) == []
    assert rolled_back_updates({"rollback_themes": {"astra": {"version": "4.1"}, "bad": 3}})[0].slug == "astra"


@pytest.mark.usefixtures("prefect_harness")
async def test_a_version_mainwp_remembers_as_rolled_back_is_sent_nowhere_and_counts_towards_the_hold(
    dashboard, tmp_path: Path
):
    emulator = dashboard(sites=12, seed=4)
    slug, version, offering = shared_plugin(emulator.truth())
    rolled, other = offering[0], offering[1]
    emulator.post("faults/items", {"site_id": rolled["id"], "type": "plugin", "slug": slug, "mode": "rollback"})
    async with DashboardClient.from_env() as client:  # someone updates it by hand in the dashboard, outside a night
        answer = await client.update_site_items(rolled["id"], UpdateType.plugin, [slug])
        assert "rolled it back" in (answer.items[0].error or "")
        assert [r.version for r in await client.rolled_back_updates(rolled["id"])] == [version]
    policy = tmp_path / "policy.yaml"
    policy.write_text("hold_after_failures: 1\n")

    path = await update_fleet(selection=Selection(sites=[str(rolled["id"]), str(other["id"])]),
                              policy_file=str(policy), report_dir=str(tmp_path / "reports"))

    summary = Summary.read(Path(path))
    items = {item.site_id: item for item in summary.items if item.slug == slug}
    assert items[rolled["id"]].outcome is Outcome.held and items[rolled["id"]].rule == "rolled_back"
    assert items[other["id"]].outcome is Outcome.held and items[other["id"]].rule == "rolled_back_elsewhere"
    assert "rolled version" in items[other["id"]].reason and "back on 1 site," in items[other["id"]].reason
    truth = emulator.truth()["sites"]
    assert truth[str(other["id"])]["plugins"][slug]["version"] != version  # never sent
    [hold] = HoldStore(memory_of()).active()
    assert (hold.slug, hold.version) == (slug, version) and hold.reason.startswith("failed on 1 sites")


@pytest.mark.long(20)
@pytest.mark.usefixtures("prefect_harness")
async def test_later_nights_read_the_rollback_memory_only_where_an_update_failed(dashboard, monkeypatch):
    """The first night reads every site offered a plugin or theme; the next reads only the site where WordPress
    rolled an update back (and the version it rolled back is still held there), none of the others."""
    emulator = dashboard(sites=12, seed=4)
    slug, version, offering = shared_plugin(emulator.truth())
    rolled = offering[0]
    emulator.post("faults/items", {"site_id": rolled["id"], "type": "plugin", "slug": slug, "mode": "rollback"})
    read: list[int] = []
    original = DashboardClient.rolled_back_updates

    async def recorded(self, id_or_domain):
        read.append(int(id_or_domain))
        return await original(self, id_or_domain)

    monkeypatch.setattr(DashboardClient, "rolled_back_updates", recorded)
    first, plan = read_run(await update_fleet(selection=Selection()))
    offered = {item.site_id for item in plan.items if item.type in (UpdateType.plugin, UpdateType.theme)
               and item.decision.value != "ignored"}
    assert sorted(read) == sorted(offered) and rolled["id"] in offered
    [failed] = [item for item in first.items if item.site_id == rolled["id"] and item.slug == slug]
    assert failed.outcome is Outcome.failed
    read.clear()
    second, _ = read_run(await update_fleet(selection=Selection()))
    assert read == [rolled["id"]]
    [again] = [item for item in second.items if item.site_id == rolled["id"] and item.slug == slug]
    assert again.outcome is Outcome.held and again.rule == "rolled_back"
