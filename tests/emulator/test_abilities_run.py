"""Every ability runs once with valid input over HTTP, and its output validates against its output schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft7Validator

from emulator.abilities.catalog import catalog_for
from emulator.config import EmulatorConfig
from tests.emulator.abilities_harness import Dashboard, dashboard, run

Inputs = Callable[[Dashboard], dict[str, Any] | None]


def _plugin(board: Dashboard, site_id: int = 2, active: bool | None = None) -> str:
    plugins = board.emulator.state.sites[site_id].plugins.values()
    return next(p.slug for p in plugins if active is None or p.active == active)


def _theme(board: Dashboard, site_id: int = 2) -> str:
    return next(iter(board.emulator.state.sites[site_id].themes))


def _job(board: Dashboard) -> dict[str, Any]:
    return {"job_id": board.jobs.enqueue("sync", [1, 2])["job_id"]}


VALID_INPUTS: dict[str, Inputs] = {
    "core/get-site-info": lambda b: {"fields": ["name", "version"]},
    "core/get-environment-info": lambda b: None,
    "svc/list-sites-v1": lambda b: {"per_page": 5, "status": "connected"},
    "svc/get-site-v1": lambda b: {"site_id_or_domain": 2, "include_stats": True},
    "svc/sync-sites-v1": lambda b: {"site_ids_or_domains": [2, 3, "nowhere.example"]},
    "svc/get-site-plugins-v1": lambda b: {"site_id_or_domain": 2},
    "svc/get-site-themes-v1": lambda b: {"site_id_or_domain": 2, "status": "active"},
    "svc/add-site-v1": lambda b: {"url": "https://new-site.example.org", "name": "New", "admin_username": "admin"},
    "svc/update-site-v1": lambda b: {"site_id_or_domain": 2, "name": "Renamed", "tag_ids": [1]},
    "svc/delete-site-v1": lambda b: {"site_id_or_domain": 3, "dry_run": True},
    "svc/reconnect-site-v1": lambda b: {"site_id_or_domain": 2},
    "svc/disconnect-site-v1": lambda b: {"site_id_or_domain": 4},
    "svc/suspend-site-v1": lambda b: {"site_id_or_domain": 5},
    "svc/unsuspend-site-v1": lambda b: {"site_id_or_domain": 6},
    "svc/check-site-v1": lambda b: {"site_id_or_domain": 2},
    "svc/activate-site-plugins-v1": lambda b: {"site_id_or_domain": 2, "plugins": [_plugin(b)]},
    "svc/deactivate-site-plugins-v1": lambda b: {"site_id_or_domain": 2, "plugins": [_plugin(b), "nope/nope.php"]},
    "svc/delete-site-plugins-v1": lambda b: {"site_id_or_domain": 2, "plugins": [_plugin(b)], "dry_run": True},
    "svc/get-abandoned-plugins-v1": lambda b: {"site_id_or_domain": 2},
    "svc/activate-site-theme-v1": lambda b: {"site_id_or_domain": 2, "theme": _theme(b)},
    "svc/delete-site-themes-v1": lambda b: {"site_id_or_domain": 2, "themes": [_theme(b)], "dry_run": True},
    "svc/get-abandoned-themes-v1": lambda b: {"site_id_or_domain": 2},
    "svc/get-site-security-v1": lambda b: {"site_id_or_domain": 2},
    "svc/get-site-changes-v1": lambda b: {"site_id_or_domain": 2},
    "svc/get-site-client-v1": lambda b: {"site_id_or_domain": 2},
    "svc/get-site-costs-v1": lambda b: {"site_id_or_domain": 2},
    "svc/count-sites-v1": lambda b: {"status": "connected"},
    "svc/get-sites-basic-v1": lambda b: {"per_page": 3},
    "svc/reconnect-sites-v1": lambda b: {"site_ids_or_domains": [2]},
    "svc/disconnect-sites-v1": lambda b: {"site_ids_or_domains": [4, "nowhere.example"]},
    "svc/check-sites-v1": lambda b: {"site_ids_or_domains": [2, 3]},
    "svc/suspend-sites-v1": lambda b: {"site_ids_or_domains": [5]},
    "svc/list-updates-v1": lambda b: {"per_page": 10},
    "svc/run-updates-v1": lambda b: {"site_ids_or_domains": [2], "types": ["plugins", "themes"]},
    "svc/list-ignored-updates-v1": lambda b: {},
    "svc/set-ignored-updates-v1": lambda b: {"action": "ignore", "site_id_or_domain": 2, "type": "plugin",
                                             "slug": _plugin(b)},
    "svc/get-site-updates-v1": lambda b: {"site_id_or_domain": 2},
    "svc/update-site-core-v1": lambda b: {"site_id_or_domain": 2},
    "svc/update-site-plugins-v1": lambda b: {"site_id_or_domain": 2},
    "svc/update-site-themes-v1": lambda b: {"site_id_or_domain": 2},
    "svc/update-site-translations-v1": lambda b: {"site_id_or_domain": 2},
    "svc/ignore-site-core-v1": lambda b: {"site_id_or_domain": 2},
    "svc/ignore-site-plugins-v1": lambda b: {"site_id_or_domain": 2, "slugs": [_plugin(b)]},
    "svc/ignore-site-themes-v1": lambda b: {"site_id_or_domain": 2, "slugs": [_theme(b)], "action": "remove"},
    "svc/update-all-v1": lambda b: {"site_ids_or_domains": [3]},
    "svc/list-clients-v1": lambda b: {"search": "1"},
    "svc/count-clients-v1": lambda b: None,
    "svc/get-client-v1": lambda b: {"client_id_or_email": b.emulator.state.clients[1].client_email},
    "svc/add-client-v1": lambda b: {"name": "New Client", "client_email": "new@example.com", "selected_sites": [2]},
    "svc/update-client-v1": lambda b: {"client_id_or_email": 1, "city": "Paris"},
    "svc/delete-client-v1": lambda b: {"client_id_or_email": 1, "dry_run": True},
    "svc/get-client-sites-v1": lambda b: {"client_id_or_email": 1},
    "svc/count-client-sites-v1": lambda b: {"client_id_or_email": 1},
    "svc/get-client-costs-v1": lambda b: {"client_id_or_email": 1},
    "svc/suspend-client-v1": lambda b: {"client_id_or_email": 1},
    "svc/unsuspend-client-v1": lambda b: {"client_id_or_email": 1},
    "svc/list-tags-v1": lambda b: {"per_page": 2},
    "svc/get-tag-v1": lambda b: {"tag_id": 1},
    "svc/add-tag-v1": lambda b: {"name": "New Tag", "color": "#112233"},
    "svc/update-tag-v1": lambda b: {"tag_id": 1, "name": "Renamed Tag"},
    "svc/delete-tag-v1": lambda b: {"tag_id": 2, "dry_run": True},
    "svc/get-tag-sites-v1": lambda b: {"tag_id": 5},
    "svc/get-tag-clients-v1": lambda b: {"tag_id": 5},
    "svc/get-batch-job-status-v1": _job,
}


def test_every_ability_has_an_input() -> None:
    assert set(VALID_INPUTS) == set(catalog_for("svc").abilities)


@pytest.mark.parametrize("name", sorted(VALID_INPUTS))
async def test_every_ability_runs_and_its_output_validates(name: str) -> None:
    async with dashboard(EmulatorConfig(namespace="svc", sites=8, seed=1, time_scale=1e-4), lifespan=False) as board:
        site = board.emulator.state.sites[2]
        site.wp_offer = site.known_wp_offer = "9.9.9"
        payload = VALID_INPUTS[name](board)
        async with board.client() as client:
            response = await run(client, name, payload)
    assert response.status_code == 200, response.text
    output = response.json()
    schema = catalog_for("svc").abilities[name].output_schema
    problems = [e.message for e in Draft7Validator(schema).iter_errors(output)]
    assert not problems, problems
