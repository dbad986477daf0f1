"""The run endpoint's rules over HTTP: method, confirm, not-found, auth and input matrices, module gating, the
per-site gates, and one state shared with REST v2."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from emulator.abilities.catalog import catalog_for
from emulator.abilities.context import DEFAULT_CONFIRM_MESSAGE
from emulator.config import ALL_MODULES, EmulatorConfig
from tests.emulator.abilities_harness import ROOT_URL, Dashboard, dashboard, run

CONFIG = EmulatorConfig(namespace="svc", sites=8, seed=1, time_scale=1e-4)


@pytest.fixture
async def board():
    async with dashboard(CONFIG, lifespan=False) as board:
        yield board


async def test_method_matrix(board: Dashboard) -> None:
    messages = {"GET": "Read-only abilities require GET method.",
                "POST": "Abilities that perform updates require POST method.",
                "DELETE": "Abilities that perform destructive actions require DELETE method."}
    checked = 0
    async with board.client() as client:
        for ability in catalog_for("svc").abilities.values():
            for method in ("GET", "POST", "DELETE"):
                if method in ability.allowed_methods:
                    continue
                response = await client.request(method, f"/abilities/{ability.name}/run")
                assert response.status_code == 405, (ability.name, method)
                assert response.json() == {"code": "rest_ability_invalid_method",
                                           "message": messages[ability.run_method], "data": {"status": 405}}
                checked += 1
        # the spec's POST for the job status is served next to the real dashboard's GET
        posted = await client.post("/abilities/svc/get-batch-job-status-v1/run",
                                   json={"input": {"job_id": f"sync_{uuid.uuid4()}"}})
    assert posted.status_code == 404 and posted.json()["code"] == "svc_job_not_found"
    assert checked == 64 * 2 - 1
    assert catalog_for("svc").abilities["svc/delete-tag-v1"].run_method == "DELETE"
    assert catalog_for("svc").abilities["svc/delete-site-v1"].run_method == "POST"


DESTRUCTIVE = {
    "svc/delete-site-v1": ({"site_id_or_domain": 3}, "Deletion requires confirm parameter to be true."),
    "svc/delete-site-plugins-v1": ({"site_id_or_domain": 2, "plugins": ["@plugin"]},
                                   DEFAULT_CONFIRM_MESSAGE),
    "svc/delete-site-themes-v1": ({"site_id_or_domain": 2, "themes": ["@theme"]},
                                  DEFAULT_CONFIRM_MESSAGE),
    "svc/delete-client-v1": ({"client_id_or_email": 1},
                             DEFAULT_CONFIRM_MESSAGE),
    "svc/delete-tag-v1": ({"tag_id": 2}, "Tag deletion requires confirmation. Set confirm:true to proceed."),
}


def target_exists(board: Dashboard, name: str, slug: str) -> bool:
    state = board.emulator.state
    return {
        "svc/delete-site-v1": lambda: 3 in state.sites,
        "svc/delete-site-plugins-v1": lambda: slug in state.sites[2].plugins,
        "svc/delete-site-themes-v1": lambda: slug in state.sites[2].themes,
        "svc/delete-client-v1": lambda: 1 in state.clients,
        "svc/delete-tag-v1": lambda: 2 in state.tags,
    }[name]()


@pytest.mark.parametrize("name", sorted(DESTRUCTIVE))
@pytest.mark.parametrize("mode", ["neither", "both", "dry_run", "confirm"])
async def test_confirm_matrix(board: Dashboard, name: str, mode: str) -> None:
    payload, message = DESTRUCTIVE[name]
    site2 = board.emulator.state.sites[2]
    slug = next(iter(site2.plugins)) if "plugins" in name else next(iter(site2.themes))
    payload = {k: [slug] if v in (["@plugin"], ["@theme"]) else v for k, v in payload.items()}
    flags = {"neither": {}, "both": {"dry_run": True, "confirm": True}, "dry_run": {"dry_run": True},
             "confirm": {"confirm": True}}[mode]
    async with board.client() as client:
        response = await run(client, name, payload | flags)
    body = response.json()
    if mode == "neither":
        assert (response.status_code, body["code"], body["message"]) == (400, "svc_confirmation_required", message)
    elif mode == "both":
        assert (response.status_code, body["code"]) == (400, "svc_invalid_input")
        assert body["message"] == "Cannot specify both dry_run and confirm."
    elif mode == "dry_run":
        assert response.status_code == 200 and body["dry_run"] is True and "would_affect" in body
    else:
        assert response.status_code == 200, body
    assert target_exists(board, name, slug) == (mode != "confirm")


NOT_FOUND = [
    ("svc/get-site-v1", {"site_id_or_domain": 9999}, 403, "svc_site_not_found", "No site found with ID 9999."),
    ("svc/get-site-v1", {"site_id_or_domain": "nope.example.com"}, 403, "svc_site_not_found",
     'No site found matching "nope.example.com".'),
    ("svc/update-site-plugins-v1", {"site_id_or_domain": 9999}, 403, "svc_site_not_found", None),
    ("svc/set-ignored-updates-v1", {"action": "ignore", "site_id_or_domain": "x.example", "type": "plugin",
                                    "slug": "a"}, 403, "svc_site_not_found", None),
    ("svc/reconnect-site-v1", {"site_id_or_domain": 9999}, 404, "svc_site_not_found", None),
    ("svc/check-site-v1", {"site_id_or_domain": "nope.example.com"}, 404, "svc_site_not_found", None),
    ("svc/delete-site-v1", {"site_id_or_domain": 9999, "confirm": True}, 404, "svc_site_not_found", None),
    ("svc/check-sites-v1", {"site_ids_or_domains": ["nope.example.com", 9999]}, 404, "svc_site_not_found",
     "No valid sites found."),
    ("svc/get-client-v1", {"client_id_or_email": 999}, 404, "svc_client_not_found", "No client found with ID 999."),
    ("svc/get-client-v1", {"client_id_or_email": "nobody@example.com"}, 404, "svc_client_not_found", None),
    ("svc/get-tag-v1", {"tag_id": 999}, 404, "svc_tag_not_found", "No tag found with ID 999."),
    ("svc/delete-tag-v1", {"tag_id": 999, "confirm": True}, 404, "svc_tag_not_found", None),
    ("svc/get-batch-job-status-v1", {"job_id": "update_" + str(uuid.UUID(int=7))}, 404, "svc_job_not_found",
     "Batch job not found. Job may have expired (jobs are kept for 24 hours)."),
    ("svc/get-batch-job-status-v1", {"job_id": "nope_123"}, 400, "ability_invalid_input",
     'Ability "svc/get-batch-job-status-v1" has invalid input. Reason: input[job_id] does not match pattern '
     "^(sync|update|reconnect|disconnect|check|suspend)_."),
    ("svc/no-such-ability-v1", {}, 404, "rest_ability_not_found", "Ability not found."),
]


@pytest.mark.parametrize(("name", "payload", "status", "code", "message"), NOT_FOUND)
async def test_not_found_matrix(board: Dashboard, name, payload, status, code, message) -> None:
    async with board.client() as client:
        response = await run(client, name, payload, method=None if "no-such" not in name else "POST")
    body = response.json()
    assert (response.status_code, body["code"]) == (status, code), body
    assert body["data"]["status"] == status
    if message:
        assert body["message"] == message
    if status == 403:  # resolved in the permission phase: WordPress keeps the 404 aside
        assert body["additional_data"] == [{"status": 404}]
    else:
        assert "additional_data" not in body


async def test_unresolved_sites_are_listed_per_item(board: Dashboard) -> None:
    async with board.client() as client:
        listed = (await run(client, "svc/list-updates-v1", {"site_ids_or_domains": [2, "nope.example.com"]})).json()
        synced = (await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": [2, 9999]})).json()
    assert listed["errors"] == [{"site_id": 0, "site_url": "nope.example.com", "type": "site", "slug": "",
                                 "code": "svc_site_not_found", "message": 'No site found matching "nope.example.com".'}]
    assert {u["site_id"] for u in listed["updates"]} == {2}
    assert synced["total_synced"] == 1 and synced["errors"][0]["identifier"] == 9999


AUTH_CASES = [
    # credential, list status/code, read-only run status/code, write run status/code
    ("none", (401, "rest_forbidden"), (401, "svc_permission_denied"), (401, "svc_permission_denied")),
    ("app", (200, None), (200, None), (200, None)),
    ("wrong-password", (401, "incorrect_password"), (401, "incorrect_password"), (401, "incorrect_password")),
    ("wrong-user", (401, "invalid_username"), (401, "invalid_username"), (401, "invalid_username")),
    ("read_write", (200, None), (200, None), (200, None)),
    ("read", (200, None), (200, None), (401, "svc_rest_authentication_error")),
    ("disabled", (401, "svc_rest_authentication_disabled_key"), (401, "svc_rest_authentication_disabled_key"),
     (401, "svc_rest_authentication_disabled_key")),
    ("unknown", (401, "svc_rest_authentication_disabled_key"), (401, "svc_rest_authentication_disabled_key"),
     (401, "svc_rest_authentication_disabled_key")),
    ("garbage", (401, "svc_rest_authentication_missing_parameter"),
     (401, "svc_rest_authentication_missing_parameter"), (401, "svc_rest_authentication_missing_parameter")),
]


def auth_client(board: Dashboard, credential: str) -> httpx.AsyncClient:
    if credential in ("none", "app", "read_write", "read", "disabled"):
        return board.client(None if credential == "none" else credential)
    headers = {
        "unknown": {"Authorization": f"Bearer {'1' * 40}=={'2' * 40}"},
        "garbage": {"Authorization": "Bearer not-a-token"},
    }.get(credential, {})
    user = board.credentials["application_password"]["username"]
    basic = {"wrong-password": (user, "abcd efgh ijkl mnop qrst uvwx"), "wrong-user": ("mallory", "x")}.get(credential)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app),
                             base_url=ROOT_URL + "/wp-json/wp-abilities/v1", headers=headers, auth=basic)


@pytest.mark.parametrize(("credential", "listing", "read_run", "write_run"), AUTH_CASES)
async def test_auth_matrix(board: Dashboard, credential, listing, read_run, write_run) -> None:
    async with auth_client(board, credential) as client:
        answers = [await client.get("/abilities"), await run(client, "svc/list-sites-v1", {}),
                   await run(client, "svc/add-tag-v1", {"name": f"tag by {credential}"})]
    for response, (status, code) in zip(answers, (listing, read_run, write_run), strict=True):
        assert response.status_code == status, (credential, response.text)
        if code:
            assert response.json()["code"] == code
            assert response.json()["data"]["status"] == 401
    if credential == "none":
        assert answers[1].json()["message"] == "You must be logged in to access this ability."
        assert answers[1].json()["additional_data"] == [{"status": 401}]
    if credential == "read":
        assert answers[2].json()["message"] == "The API key provided does not have write permissions."


async def test_bearer_refused_when_switched_off() -> None:
    config = CONFIG.model_copy(update={"abilities_accept_bearer": False})
    async with dashboard(config, lifespan=False) as board, board.client("read_write") as client:
        listing = await client.get("/abilities")
        ran = await run(client, "svc/list-sites-v1", {})
    assert (listing.status_code, listing.json()["code"]) == (401, "rest_forbidden")
    assert (ran.status_code, ran.json()["code"]) == (401, "svc_permission_denied")


INVALID_INPUTS = [
    ("svc/add-tag-v1", {"name": "Bad", "color": "blue"}, "input[color] does not match pattern ^#[0-9A-Fa-f]{6}$."),
    ("svc/list-sites-v1", {"status": "bogus"},
     "input[status] is not one of any, connected, disconnected, suspended, and available_update."),
    ("svc/list-sites-v1", {"nope": 1}, "nope is not a valid property of Object."),
    ("svc/list-sites-v1", {"per_page": 500}, "input[per_page] must be between 1 (inclusive) and 100 (inclusive)"),
    ("svc/get-site-v1", {"include_stats": True}, "site_id_or_domain is a required property of input."),
    ("svc/get-site-v1", None, "input is not of type object."),
    ("svc/get-tag-v1", {"tag_id": "abc"}, "input[tag_id] is not of type integer."),
    ("svc/list-updates-v1", {"types": ["core", "nope"]},
     "input[types][1] is not one of core, plugins, themes, and translations."),
    ("svc/add-tag-v1", {"name": ""}, "input[name] must be at least 1 character long."),
    ("svc/add-client-v1", {"name": "x", "client_email": "not-an-email"}, "Invalid email address."),
]


@pytest.mark.parametrize(("name", "payload", "reason"), INVALID_INPUTS)
async def test_invalid_input_reasons(board: Dashboard, name, payload, reason) -> None:
    async with board.client() as client:
        response = await run(client, name, payload)
    assert response.status_code == 400
    assert response.json() == {"code": "ability_invalid_input",
                               "message": f'Ability "{name}" has invalid input. Reason: {reason}',
                               "data": {"status": 400}}


async def test_input_in_the_query_as_brackets_or_json_and_in_the_body(board: Dashboard) -> None:
    async with board.client() as client:
        brackets = await client.get("/abilities/svc/list-updates-v1/run?input[site_ids_or_domains][]=2"
                                    "&input[site_ids_or_domains][]=3&input[per_page]=1&input[types][0]=plugins")
        as_json = await client.get("/abilities/svc/list-sites-v1/run",
                                   params={"input": json.dumps({"per_page": 1, "page": 2})})
        truthy = await client.get("/abilities/svc/get-site-v1/run?input[site_id_or_domain]=2"
                                  "&input[include_stats]=true")
        posted = await client.post("/abilities/svc/add-tag-v1/run", json={"input": {"name": "Posted"}})
        broken = await client.post("/abilities/svc/add-tag-v1/run", content=b"{not json",
                                   headers={"Content-Type": "application/json"})
        no_schema = await client.get("/abilities/core/get-environment-info/run", params={"input": "{}"})
    assert brackets.status_code == 200
    body = brackets.json()
    assert body["per_page"] == 1 and len(body["updates"]) == 1
    assert {u["site_id"] for u in body["updates"]} <= {2, 3} and body["summary"]["core"] == 0
    assert as_json.json()["page"] == 2 and len(as_json.json()["items"]) == 1
    assert "stats" in truthy.json()
    assert posted.status_code == 200 and posted.json()["name"] == "Posted"
    assert (broken.status_code, broken.json()["code"]) == (400, "rest_invalid_json")
    assert (no_schema.status_code, no_schema.json()["code"]) == (400, "ability_missing_input_schema")


async def test_module_gating() -> None:
    config = CONFIG.model_copy(update={"modules": frozenset(m for m in ALL_MODULES
                                                            if m not in ("cost-tracker", "logs"))})
    async with dashboard(config, lifespan=False) as board, board.client() as client:
        answers = [await run(client, "svc/get-site-costs-v1", {"site_id_or_domain": 2}),
                   await run(client, "svc/get-client-costs-v1", {"client_id_or_email": 1}),
                   await run(client, "svc/get-site-changes-v1", {"site_id_or_domain": 2})]
        listed = await client.get("/abilities", params={"per_page": 100})
    for response in answers:
        assert (response.status_code, response.json()["code"]) == (501, "svc_module_not_available")
    assert len(listed.json()) == 64


async def test_abilities_and_rest_v2_share_one_state(board: Dashboard) -> None:
    bearer = {"Authorization": "Bearer " + board.credentials["api_keys"]["read_write"]}
    async with board.client() as abilities, httpx.AsyncClient(
            transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL + "/wp-json/svc/v2",
            headers=bearer) as rest:
        added = (await run(abilities, "svc/add-tag-v1", {"name": "Shared Tag"})).json()
        rest_tags = (await rest.get("/tags")).json()["data"]
        assert rest_tags[str(added["id"])]["name"] == "Shared Tag"
        created = (await rest.post("/tags/add", data={"name": "From REST"})).json()["data"]
        via_ability = (await run(abilities, "svc/get-tag-v1", {"tag_id": int(created["id"])})).json()
    assert via_ability["name"] == "From REST"


async def test_site_resolution_by_id_domain_and_url(board: Dashboard) -> None:
    site = board.emulator.state.sites[4]
    domain = site.url.split("://", 1)[1].rstrip("/")
    async with board.client() as client:
        for identifier in (4, "4", domain, site.url, "www." + domain, domain.upper()):
            response = await run(client, "svc/get-site-v1", {"site_id_or_domain": identifier})
            assert response.status_code == 200 and response.json()["id"] == 4, identifier


async def test_offline_sites_and_old_children_are_refused_per_item(board: Dashboard) -> None:
    state = board.emulator.state
    offline, outdated = state.sites[3], state.sites[1]
    offline.offline_check_result = -1
    assert outdated.child_version.startswith("3.")
    async with board.client() as client:
        synced = (await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": [1, 2, 3]})).json()
        updated = (await run(client, "svc/run-updates-v1", {"site_ids_or_domains": [1, 3]})).json()
        one = await run(client, "svc/update-site-plugins-v1", {"site_id_or_domain": 1})
        listed = (await run(client, "svc/get-site-v1", {"site_id_or_domain": 3})).json()
    assert synced["total_synced"] == 1
    assert {(e["identifier"], e["code"]) for e in synced["errors"]} == {
        (offline.url, "svc_site_offline"), (outdated.url, "svc_child_outdated")}
    assert {(e["site_id"], e["code"]) for e in updated["errors"]} == {(3, "svc_site_offline"),
                                                                       (1, "svc_child_outdated")}
    assert updated["updated"] == []
    assert (one.status_code, one.json()["code"]) == (400, "svc_child_outdated")
    assert one.json()["data"]["site_id"] == 1
    assert listed["status"] == "disconnected"  # abilities count a site known offline as disconnected


async def test_update_results_keep_the_real_quirks(board: Dashboard) -> None:
    """A plugin failure is an error, a theme failure is silent, a silent failure is reported as success."""
    state, ops = board.emulator.state, board.emulator.operations
    site = state.sites[2]
    pending = {(u.type, u.slug) for u in state.pending_updates(site)}
    plugins = sorted(slug for kind, slug in pending if kind == "plugin")
    theme = next(iter(site.themes))
    site.themes[theme].known_offer = site.themes[theme].offer = "99.0"
    ops.set_item_fault(site, "theme", theme, "fail")
    ops.set_item_fault(site, "plugin", plugins[0], "fail")
    if len(plugins) > 1:
        ops.set_item_fault(site, "plugin", plugins[1], "silent")
    before = {slug: site.plugins[slug].version for slug in plugins}
    async with board.client() as client:
        body = (await run(client, "svc/run-updates-v1", {"site_ids_or_domains": [2],
                                                          "types": ["plugins", "themes"]})).json()
    assert [(e["slug"], e["code"], e["message"]) for e in body["errors"]] == [
        (plugins[0], "svc_update_failed", "Download failed.")]
    reported = {u["slug"] for u in body["updated"]}
    assert theme not in reported and plugins[0] not in reported
    assert set(plugins[1:]) <= reported
    if len(plugins) > 1:
        assert site.plugins[plugins[1]].version == before[plugins[1]]  # silently not moved
    for slug in plugins[2:]:
        assert site.plugins[slug].version != before[slug]
    assert body["summary"] == {"total_updated": len(body["updated"]), "total_errors": 1, "sites_updated": 1}
