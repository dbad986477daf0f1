"""Reviving a site dead at load through its Fleet Guard, step by step, without Prefect: over HTTP (in-process)
against the emulator, whose guard follows the PHP's rules. What the night does when the guard can be counted on,
and what it says when it cannot: no guard, no loader, a corrupt kept version, core out of reach; a theme too."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from dashboard.client import DashboardClient
from emulator.records import Site
from fleet.engine.culprit import contain_site
from fleet.engine.dashboard_switchboard import DashboardSwitchboard
from fleet.engine.revival import GuardLine, revive
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Containment, ContainmentStatus, UpdateType
from fleet.rules.plan import Decision, PlanItem, SiteRecord
from fleet.rules.policy import Policy
from guard.client import GuardClient, GuardSite
from guard.keys import FleetKeys
from guard.signing import private_key, public_key_text
from tests.emulator import test_site_pages
from tests.emulator.abilities_harness import ROOT_URL, Dashboard
from tests.emulator.test_breakage import ability, mark, truth_of
from tests.emulator.test_guard import set_guard

board, web = test_site_pages.board, test_site_pages.web
KEY = private_key(base64.b64encode(b"fleet-guard-revival-test-key!!!!").decode())


@pytest.fixture
async def dashboard_client(board: Dashboard) -> AsyncIterator[DashboardClient]:
    client = DashboardClient.from_credentials(board.credentials, transport=httpx.ASGITransport(app=board.app))
    async with client:
        yield client


def site_with_plugins(board: Dashboard, count: int = 3) -> Site:
    state = board.emulator.state
    for site in state.sites.values():
        offered = [u for u in state.pending_updates(site, ("plugin",)) if site.plugins[u.slug].active]
        if site.reachable and site.child_connected and not site.suspended and len(offered) >= count:
            return site
    raise AssertionError("no site with enough active plugins to update")


def items_of(board: Dashboard, site: Site, type_: str) -> list[PlanItem]:
    state = board.emulator.state
    items = site.plugins if type_ == "plugin" else site.themes
    return [PlanItem(site_id=site.id, type=UpdateType(type_), slug=u.slug, name=items[u.slug].name,
                     from_version=u.current_version, to_version=u.new_version, decision=Decision.apply)
            for u in state.pending_updates(site, (type_,)) if type_ != "plugin" or items[u.slug].active]


async def apply(board: Dashboard, site: Site, type_: str, items: list[PlanItem]) -> None:
    await ability(board, f"update-site-{type_}s-v1", {"site_id_or_domain": site.id, "slugs": [i.slug for i in items]})


async def night_step(board: Dashboard, web: httpx.AsyncClient, client: DashboardClient, site: Site, step: UpdateType,
                     applied: list[PlanItem], keys: FleetKeys | None = FleetKeys(KEY)) -> Containment:
    """What the night does after the step: contain (the child is dead: unreachable), then revive."""
    template = f"{ROOT_URL}{board.credentials['site_url_template'].removeprefix(ROOT_URL)}"
    settings = PipelineSettings(probe_url_template=template, _env_file=None)
    switchboard = DashboardSwitchboard(client, SiteRecord(id=site.id, url=site.url, name=site.name), web, settings)
    dead = await contain_site(step, applied, Policy(), switchboard)
    assert dead.status is ContainmentStatus.unreachable
    line = None if keys is None else GuardLine(GuardClient(web, keys),
                                               GuardSite(site.url, template.format(host=site.domain)))
    return await revive(step, applied, Policy(), line, switchboard, dead)


async def armed_and_broken(board: Dashboard, web: httpx.AsyncClient, **guard: Any) -> tuple[Site, list[PlanItem], str]:
    site = site_with_plugins(board)
    await set_guard(web, board, site, armed=True, keys=[public_key_text(KEY)], **guard)
    applied = items_of(board, site, "plugin")
    bad = applied[1].slug
    await mark(web, board, site, bad, "load")
    await apply(board, site, "plugin", applied)
    return site, applied, bad


async def test_a_site_dead_at_load_is_revived_with_its_last_working_version(board, web, dashboard_client) -> None:
    site, applied, bad = await armed_and_broken(board, web)
    old = next(item.from_version for item in applied if item.slug == bad)
    result = await night_step(board, web, dashboard_client, site, UpdateType.plugin, applied)
    assert result.status is ContainmentStatus.revived and result.culprit.slug == bad and result.rounds >= 1
    truth = await truth_of(web, board, site)
    assert truth["front_end"]["status"] == "up" and truth["plugins"][bad]["version"] == old
    assert truth["plugins"][bad]["active"] and truth["sync_errors"] == ""
    for item in applied:
        if item.slug != bad:
            assert truth["plugins"][item.slug]["version"] == item.to_version and truth["plugins"][item.slug]["active"]
    assert "1. its guard 1.0.0 answered" in result.detail and f"{old} put back" in result.detail


async def test_a_corrupt_kept_version_leaves_the_culprit_off_and_the_site_up(board, web, dashboard_client) -> None:
    site, applied, bad = await armed_and_broken(board, web)
    old = next(item.from_version for item in applied if item.slug == bad)
    await set_guard(web, board, site, corrupt=[f"plugin:{bad}@{old}"])
    result = await night_step(board, web, dashboard_client, site, UpdateType.plugin, applied)
    assert result.status is ContainmentStatus.contained and result.culprit.slug == bad
    assert "corrupt" in result.detail and "left deactivated" in result.detail
    truth = await truth_of(web, board, site)
    assert truth["front_end"]["status"] == "up" and not truth["plugins"][bad]["active"]


@pytest.mark.parametrize(("guard", "why"), [
    ({"loader": "the must-use folder is not writable"}, "its must-use loader is missing: the must-use loader is "
                                                         "missing: the must-use folder is not writable"),
    ({"version": "0.9.0"}, "guard 0.9.0 is older than 1.0.0"),
    ({"removed": True}, "its guard does not answer"),
])
async def test_a_guard_the_night_cannot_count_on_leaves_the_site_as_it_is_saying_why(
        board, web, dashboard_client, guard: dict, why: str) -> None:
    site, applied, _ = await armed_and_broken(board, web)
    await set_guard(web, board, site, **guard)
    result = await night_step(board, web, dashboard_client, site, UpdateType.plugin, applied)
    assert result.status is ContainmentStatus.unreachable and f"the night cannot revive it: {why}" in result.detail
    assert (await truth_of(web, board, site))["front_end"]["dead_at_load"]


async def test_without_a_key_or_for_core_the_night_says_it_cannot_revive(board, web, dashboard_client) -> None:
    site, applied, _ = await armed_and_broken(board, web)
    no_key = await night_step(board, web, dashboard_client, site, UpdateType.plugin, applied, keys=None)
    assert "the night cannot revive it: no guard key is set" in no_key.detail
    core = await night_step(board, web, dashboard_client, site, UpdateType.core, applied)
    assert "core updates are out of the guard's reach" in core.detail


async def test_a_theme_dead_at_load_is_put_back(board, web, dashboard_client) -> None:
    state = board.emulator.state
    site = next(s for s in state.sites.values() if s.reachable and s.child_connected and not s.suspended
                and any(s.themes[u.slug].active for u in state.pending_updates(s, ("theme",))))
    await set_guard(web, board, site, armed=True, keys=[public_key_text(KEY)])
    applied = [item for item in items_of(board, site, "theme") if site.themes[item.slug].active]
    answer = await web.post("/__emulator__/faults/items", headers=test_site_pages.admin(board),
                            json={"site_id": site.id, "type": "theme", "slug": applied[0].slug, "mode": "load"})
    assert answer.status_code == 200
    await apply(board, site, "theme", applied)
    result = await night_step(board, web, dashboard_client, site, UpdateType.theme, applied)
    assert result.status is ContainmentStatus.revived and result.culprit.slug == applied[0].slug
    truth = await truth_of(web, board, site)
    assert truth["front_end"]["status"] == "up"
    assert truth["themes"][applied[0].slug]["version"] == applied[0].from_version
