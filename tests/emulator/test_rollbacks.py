"""MainWP's memory of updates WordPress rolled back: the update answers with the dashboard's rollback message, the
site's update detail lists the item under `rollback_plugins` while that version is still offered (and the ability,
filling `rollback_items` with it, fails its own output schema as the real one does), and a later successful install
of that version forgets it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from emulator.records import Site
from tests.emulator.abilities_harness import ROOT_URL, Dashboard
from tests.emulator.test_breakage import ability, board, mark, web  # noqa: F401 (fixtures)
from tests.emulator.test_site_pages import healthy_site_with_plugin_update


@pytest.fixture
async def rest(board: Dashboard) -> AsyncIterator[httpx.AsyncClient]:  # noqa: F811
    key = board.credentials["api_keys"]["read_write"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL + "/wp-json/svc/v2",
                                 headers={"Authorization": f"Bearer {key}"}) as client:
        yield client


async def update_plugin(rest: httpx.AsyncClient, site: Site, slug: str) -> dict[str, Any]:
    answer = await rest.post(f"/updates/{site.id}/update/plugins", data={"slug": slug})
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_a_rolled_back_update_is_remembered_until_that_version_installs(
        board: Dashboard, web: httpx.AsyncClient, rest: httpx.AsyncClient) -> None:  # noqa: F811
    site, slug = healthy_site_with_plugin_update(board)
    item = site.plugins[slug]
    old, offered = item.version, item.offer
    before = (await rest.get(f"/updates/{site.id}")).json()["data"]
    assert "rollback_plugins" not in before  # nothing remembered yet

    await mark(web, board, site, slug, "rollback")
    answer = await update_plugin(rest, site, slug)
    message = (f"WordPress detected an error with {item.name} and rolled it back from version {offered} "
               f"to version {old} to ensure site stability.")
    assert answer["data"][slug]["success"] == 0 and answer["data"][quote(slug, safe="")]["error"] == message
    assert site.plugins[slug].version == old

    detail = (await rest.get(f"/updates/{site.id}")).json()["data"]
    remembered = detail["rollback_plugins"][slug]
    assert (remembered["name"], remembered["old_version"], remembered["version"]) == (item.name, old, offered)
    assert isinstance(remembered["created"], int)
    assert "rollback_plugins" not in (await rest.get(f"/updates/{site.id}", params={"type": "themes"})).json()["data"]
    assert "rollback_plugins" not in (await rest.get(f"/updates/{site.id}",
                                                     params={"search": "no-such-name-xyz"})).json()["data"]
    # the ability fills `plugins` keyed by slug, a JSON object its own output schema (an array) refuses
    site_updates = await ability(board, "get-site-updates-v1", {"site_id_or_domain": site.id})
    assert site_updates["code"] == "ability_invalid_output"
    assert site_updates["message"].endswith("output[rollback_items][plugins] is not of type array.")

    await mark(web, board, site, slug, None)  # type: ignore[arg-type]
    installed = await update_plugin(rest, site, slug)
    assert installed["data"][slug]["success"] == 1 and site.plugins[slug].version == offered
    await ability(board, "sync-sites-v1", {"site_ids_or_domains": [site.id]})
    assert site.rollbacks["plugin"][slug] == {}  # forgotten, as the dashboard unsets it
    site_updates = await ability(board, "get-site-updates-v1", {"site_id_or_domain": site.id})
    assert site_updates["rollback_items"] == {"plugins": [], "themes": []}
