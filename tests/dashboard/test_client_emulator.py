"""Every client method against the emulator over a real socket, in both namespaces, checked against the
emulator's ground truth (`/__emulator__/state`)."""

from __future__ import annotations

import gc
import logging
import weakref
from typing import Any

import pytest

from dashboard import DashboardClient
from dashboard.errors import (
    AbilityNotFound,
    AuthenticationError,
    InvalidInput,
    JobNotFound,
    NotFound,
    PermissionDenied,
    SiteNotFound,
    TagNotFound,
)
from dashboard.models import JobState, UpdateType
from tests.dashboard.emulated import FAST_RETRIES, GroundTruth


def domain(url: str) -> str:
    return url.split("//", 1)[-1].rstrip("/")


def pending_truth(truth: GroundTruth) -> dict[tuple[int, str, str], dict[str, Any]]:
    sites = truth.state()["sites"]
    return {
        (int(site_id), UpdateType(_normal(u["type"])).value, u["slug"]): u
        for site_id, site in sites.items() for u in site["pending_updates"]
    }


def _normal(kind: str) -> str:
    return {"wp": "core", "plugins": "plugin", "themes": "theme", "translations": "translation"}.get(kind, kind)


async def test_namespace_is_discovered_from_the_rest_index(emulator: Any) -> None:
    credentials = {**emulator.credentials, "namespace": None}
    async with DashboardClient.from_credentials(credentials, **FAST_RETRIES) as dashboard:
        assert await dashboard.namespace() == emulator.credentials["namespace"]
        assert len(await dashboard.list_sites()) == 30


async def test_sites_list_count_get_by_id_and_domain(client: DashboardClient, truth: GroundTruth) -> None:
    sites = await client.list_sites()
    real = truth.state()["sites"]
    assert sorted(s.id for s in sites) == sorted(int(i) for i in real)
    assert await client.count_sites() == len(sites)
    first = sites[0]
    by_id = await client.get_site(first.id)
    by_domain = await client.get_site(domain(first.url))
    assert by_id.id == by_domain.id == first.id and by_id.url == first.url
    with pytest.raises(SiteNotFound) as missing:
        await client.get_site(999_999)
    assert "999999" in str(missing.value) and missing.value.path


async def test_legacy_v1_all_sites_matches_v2(client: DashboardClient) -> None:
    v1 = await client.all_sites()
    assert sorted(s.id for s in v1) == sorted(s.id for s in await client.list_sites())


async def test_sync_check_reconnect_and_inventory_of_one_site(client: DashboardClient, truth: GroundTruth) -> None:
    site = (await client.list_sites())[0]
    synced = await client.sync_site(site.id)
    assert synced.id == site.id and synced.last_sync is not None
    check = await client.check_site(site.id)
    assert check.id == site.id and check.http_code is not None
    reconnected = await client.reconnect_site(site.id)
    assert reconnected.id == site.id
    plugins = await client.site_plugins(site.id)
    themes = await client.site_themes(site.id)
    real = truth.state(site.id)["sites"][str(site.id)]
    assert {p.slug for p in plugins} == set(real["plugins"])
    assert {t.slug for t in themes} == set(real["themes"])


async def test_sync_and_check_many_sites_immediately(client: DashboardClient) -> None:
    ids = [s.id for s in await client.list_sites()][:5]
    sync = await client.sync_sites(ids)
    assert not sync.queued and sync.result is not None
    assert sync.result.total_synced == len(sync.result.synced) > 0
    assert {s.id for s in sync.result.synced} <= set(ids)
    assert len(sync.result.synced) + len(sync.result.errors) == len(ids)
    check = await client.check_sites(ids)
    assert not check.queued and check.result is not None
    assert len(check.result.checked) + len(check.result.errors) == len(ids)
    with pytest.raises(InvalidInput, match="empty site selection"):
        await client.sync_sites([])


async def test_answers_of_a_batch_ability_share_one_model_class_across_garbage_collections(
    client: DashboardClient,
) -> None:
    """pydantic keeps `BatchStart[SyncResult]` weakly: once the last answer was collected, the next one built
    the class again (milliseconds per answer, the largest share of a 10,000-site night's parsing)."""
    ids = [s.id for s in await client.list_sites()][:2]
    first = await client.sync_sites(ids[:1])
    model = weakref.ref(type(first))
    del first
    gc.collect()
    second = await client.sync_sites(ids[1:])
    assert type(second) is model() and not second.queued and second.result is not None


async def test_list_updates_matches_the_ground_truth_and_filters(client: DashboardClient, truth: GroundTruth) -> None:
    updates = await client.list_updates()
    real = pending_truth(truth)
    assert {(u.site_id, u.type.value, u.slug) for u in updates} == set(real)
    assert all(isinstance(u.type, UpdateType) for u in updates)
    plugins = await client.list_updates(type="plugins")
    assert plugins and {u.type for u in plugins} == {UpdateType.plugin}
    assert len(plugins) == sum(1 for key in real if key[1] == "plugin")
    one_site = plugins[0].site_id
    included = await client.list_updates(include=[one_site])
    assert included and {u.site_id for u in included} == {one_site}
    excluded = await client.list_updates(exclude=[one_site])
    assert one_site not in {u.site_id for u in excluded} and len(excluded) == len(updates) - len(included)
    needle = plugins[0].slug[:4]
    searched = await client.list_updates(search=needle.upper())
    assert searched and all(needle in u.slug.lower() or needle in u.name.lower() for u in searched)
    per_site = await client.site_updates(one_site)
    assert {(u.type, u.slug) for u in per_site} == {(u.type, u.slug) for u in included}


async def test_unknown_site_in_a_listing_is_named_in_a_warning(
    client: DashboardClient, caplog: pytest.LogCaptureFixture
) -> None:
    site = (await client.list_sites())[0]
    with caplog.at_level(logging.WARNING, logger="dashboard"):
        updates = await client.list_updates(include=[site.id, "nosuch.example.com"])
    assert {u.site_id for u in updates} <= {site.id}
    assert any("nosuch.example.com" in r.getMessage() and "list-updates-v1" in r.getMessage() for r in caplog.records)


async def test_update_one_item_through_the_rest_route(client: DashboardClient, truth: GroundTruth) -> None:
    plugin = next(u for u in await client.list_updates(type=UpdateType.plugin))
    result = await client.update_site_items(plugin.site_id, UpdateType.plugin, [plugin.slug])
    (item,) = [i for i in result.items if i.slug == plugin.slug]
    installed = truth.state(plugin.site_id)["sites"][str(plugin.site_id)]["plugins"][plugin.slug]["version"]
    if item.installed:
        assert installed == plugin.new_version
    else:
        assert installed == plugin.current_version  # a failure the emulator injected: nothing moved
    with pytest.raises(InvalidInput, match="would update nothing"):
        await client.update_site_items(plugin.site_id, "plugin", [])


async def test_run_updates_with_specific_items(client: DashboardClient, truth: GroundTruth) -> None:
    theme = next(u for u in await client.list_updates(type="theme"))
    start = await client.run_updates([theme.site_id], [UpdateType.theme], [theme.slug])
    assert not start.queued and start.result is not None
    reported = {(i.site_id, i.slug) for i in start.result.updated} | {(e.site_id, e.slug) for e in start.result.errors}
    assert reported <= {(theme.site_id, theme.slug)}
    real = truth.state(theme.site_id)["sites"][str(theme.site_id)]["themes"][theme.slug]["version"]
    # A theme failure can be silent (in neither list): only the ground truth tells.
    assert real == (theme.new_version if reported and not start.result.errors else theme.current_version)


async def test_update_all_on_one_site(client: DashboardClient) -> None:
    translation = (await client.list_updates(type="translation"))[-1]
    start = await client.update_all([translation.site_id], ["translations"])
    assert not start.queued and start.result is not None
    assert all(i.site_id == translation.site_id and i.type is UpdateType.translation for i in start.result.updated)
    assert translation.slug in {i.slug for i in start.result.updated} | {e.slug for e in start.result.errors}
    assert translation.slug not in {u.slug for u in await client.list_updates("translation", include=[
        translation.site_id])} or any(e.slug == translation.slug for e in start.result.errors)


async def test_ignore_and_unignore_one_plugin(client: DashboardClient) -> None:
    plugin = (await client.list_updates(type="plugin"))[0]
    ignored = await client.ignore_updates(plugin.site_id, "plugin", [plugin.slug])
    assert ignored.success and ignored.ignored_count == 1
    entries = await client.list_ignored_updates(plugin.site_id)
    assert any(e.slug == plugin.slug and e.site_id == plugin.site_id and e.type is UpdateType.plugin for e in entries)
    assert plugin.slug not in {u.slug for u in await client.list_updates(include=[plugin.site_id], type="plugin")}
    everywhere = await client.list_ignored_updates()
    assert any(e.slug == plugin.slug and e.site_id == plugin.site_id for e in everywhere)
    await client.unignore_updates(plugin.site_id, "plugin", [plugin.slug])
    assert not any(e.slug == plugin.slug and e.site_id == plugin.site_id
                   for e in await client.list_ignored_updates(plugin.site_id))
    assert plugin.slug in {u.slug for u in await client.list_updates(include=[plugin.site_id], type="plugin")}


async def test_tags_lifecycle(client: DashboardClient) -> None:
    tag = await client.add_tag("Client test tag", "#112233")
    assert tag.id and tag.name == "Client test tag" and tag.color == "#112233"
    assert (await client.get_tag(tag.id)).name == tag.name
    edited = await client.edit_tag(tag.id, name="Client test tag 2")
    assert edited.name == "Client test tag 2"
    assert tag.id in {t.id for t in await client.list_tags()}
    assert await client.tag_sites(tag.id) == []
    await client.delete_tag(tag.id)
    with pytest.raises(TagNotFound):
        await client.get_tag(tag.id)


async def test_clients_and_monitors(client: DashboardClient) -> None:
    clients = await client.list_clients()
    assert clients, "the emulated fleet should have clients"
    for found in clients[:2]:
        assert (await client.get_client(found.id)).id == found.id
    monitors = await client.list_monitors()
    assert any(m.id for m in monitors), "the emulated fleet should have monitors"
    for monitor in [m for m in monitors if m.id][:2]:
        assert (await client.get_monitor(monitor.id)).url == monitor.url
        check = await client.check_monitor(monitor.id)
        assert check.uptime_status in ("up", "down", "pending")
        beats = await client.monitor_heartbeats(monitor.id, period="30d")
        assert beats and {b.monitor_id for b in beats} == {monitor.id}  # the check above left one
        assert all(i.started_at is not None for i in await client.monitor_incidents(monitor.id))
    with pytest.raises(NotFound):
        await client.get_monitor(987_654)


async def test_api_keys_lifecycle_and_their_permissions(client: DashboardClient, emulator: Any) -> None:
    before = await client.list_api_keys()
    created = await client.add_api_key(description="read only from a test", permissions=["read"])
    keys = await client.list_api_keys()
    assert len(keys) == len(before) + 1
    new = next(k for k in keys if k.description == "read only from a test" and k.key_id)
    credentials = {**emulator.credentials, "api_keys": {"read_write": created.token.get_secret_value()}}
    async with DashboardClient.from_credentials(credentials, **FAST_RETRIES) as reader:
        assert await reader.count_sites() == 30
        with pytest.raises(PermissionDenied):
            await reader.add_tag("not allowed")
        await client.edit_api_key(new.key_id, active=False)
        with pytest.raises(AuthenticationError):
            await reader.count_sites()
    await client.delete_api_key(new.key_id)
    assert len(await client.list_api_keys()) == len(before)


async def test_settings_and_batch(client: DashboardClient) -> None:
    general = await client.get_settings("general")
    assert isinstance(general, dict) and general
    with pytest.raises(InvalidInput, match="unknown settings category"):
        await client.get_settings("nope")
    answer = await client.batch({"tags": {"create": [{"name": "Batch tag from test"}]}})
    created = answer["tags"]["create"][0]
    assert created["data"]["name"] == "Batch tag from test"
    assert await client.batch({}) == {}


async def test_abilities_catalog_and_run_by_annotation(client: DashboardClient, emulator: Any) -> None:
    ns = emulator.credentials["namespace"]
    abilities = await client.list_abilities()
    names = {a.name for a in abilities}
    assert len(names) == len(abilities) >= 60 and f"{ns}/list-sites-v1" in names
    tags = await client.list_abilities(category=f"{ns}-tags")
    assert tags and all(a.category == f"{ns}-tags" for a in tags)
    delete_tag = await client.get_ability("delete-tag-v1")
    assert delete_tag.run_method == "DELETE"
    assert (await client.get_ability(f"{ns}/list-sites-v1")).run_method == "GET"
    with pytest.raises(AbilityNotFound):
        await client.get_ability("no-such-ability-v1")
    listed = await client.run_ability("list-sites-v1", {"per_page": 5, "page": 2})  # GET, query input
    assert listed["page"] == 2 and len(listed["items"]) == 5
    tag = await client.run_ability("add-tag-v1", {"name": "Ability tag", "color": "#abcdef"})  # POST, JSON input
    gone = await client.run_ability("delete-tag-v1", {"tag_id": tag["id"], "confirm": True})  # DELETE, query input
    assert gone["deleted"] is True


async def test_job_status_of_unknown_job(client: DashboardClient) -> None:
    with pytest.raises(JobNotFound):
        await client.job_status("sync_00000000-0000-4000-8000-000000000000")
    with pytest.raises(InvalidInput):
        await client.job_status("no-such-job")


async def test_queued_sync_is_waited_to_completion(client: DashboardClient, truth: GroundTruth) -> None:
    ns = client.settings.namespace
    truth.options(**{f"{ns}_abilities_batch_threshold": 2})
    try:
        ids = [s.id for s in await client.list_sites()][:6]
        start = await client.sync_sites(ids)
        assert start.queued and start.job_id and start.job_id.startswith("sync_")
        seen: list[JobState] = []
        final = await client.wait_for_job(start.job_id, deadline=30, poll_interval=0.02,
                                          on_progress=lambda s: seen.append(s.status))
    finally:
        truth.options(**{f"{ns}_abilities_batch_threshold": 200})
    assert final.status is JobState.completed and final.processed == final.total == 6
    assert seen[-1] is JobState.completed


async def test_core_update_through_the_rest_route(client: DashboardClient, truth: GroundTruth) -> None:
    core = next((u for u in await client.list_updates(type="core")), None)
    assert core is not None, "the emulated fleet should offer at least one core update"
    result = await client.update_site_items(core.site_id, UpdateType.core, [])
    (item,) = result.items
    assert item.slug == "wordpress" and item.type is UpdateType.core
    real = truth.state(core.site_id)["sites"][str(core.site_id)]["wp"]["version"]
    assert real == (core.new_version if item.installed else core.current_version)


async def test_abilities_with_the_bearer_where_the_dashboard_takes_it(emulator: Any) -> None:
    credentials = {k: v for k, v in emulator.credentials.items() if k != "application_password"}
    async with DashboardClient.from_credentials(credentials, abilities_bearer=True, **FAST_RETRIES) as dashboard:
        assert await dashboard.list_ignored_updates() is not None
        assert (await dashboard.get_ability("list-sites-v1")).run_method == "GET"
