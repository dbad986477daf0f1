"""Bad input anywhere gets a WordPress-style answer, never a traceback or a 500 from the emulator itself
(the only 500s are the real dashboard's own: errors without a status, and its ability-delegation bugs)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from emulator.config import EmulatorConfig
from emulator.testing import EmulatorServer, InProcessEmulator
from tests.emulator.abilities_harness import dashboard, run

REAL_500_CODES = {
    "empty_body",
    "invalid_content_type",
    "api_key_not_found",
    "ability_invalid_input",
    "ability_invalid_permissions",
    "renew_connection_job_not_found",
    "invalid_field_id",
    "destroy_sessions_job_not_found",
    "disconnect_all_sites_job_not_found",
    "empty_name",
    "svc_rest_invalid_plugins_slugs",
    "svc_rest_invalid_themes_slugs",
}
PATHS = [
    ("GET", "/sites"),
    ("GET", "/sites/basic"),
    ("GET", "/sites/count"),
    ("POST", "/sites/sync"),
    ("POST", "/sites/check"),
    ("POST", "/sites/reconnect"),
    ("POST", "/sites/add"),
    ("POST", "/sites/1/edit"),
    ("POST", "/sites/1/sync"),
    ("GET", "/sites/1/plugins"),
    ("POST", "/sites/1/plugins/activate"),
    ("DELETE", "/sites/1/themes/delete"),
    ("POST", "/sites/1/themes/activate"),
    ("POST", "/sites/batch"),
    ("GET", "/updates"),
    ("GET", "/updates/1"),
    ("POST", "/updates/1/update/plugins"),
    ("POST", "/updates/1/wp"),
    ("POST", "/updates/1/ignore/themes"),
    ("POST", "/batch"),
    ("GET", "/tags"),
    ("POST", "/tags/add"),
    ("PUT", "/tags/1/edit"),
    ("POST", "/tags/batch"),
    ("GET", "/clients"),
    ("POST", "/clients/add"),
    ("PUT", "/clients/1/edit"),
    ("POST", "/clients/batch"),
    ("POST", "/clients/fields/add"),
    ("GET", "/costs"),
    ("POST", "/costs/add"),
    ("PUT", "/costs/1/edit"),
    ("POST", "/costs/batch"),
    ("GET", "/monitors"),
    ("GET", "/monitors/1/heartbeat"),
    ("PUT", "/monitors/1/settings"),
    ("PUT", "/monitors/settings"),
    ("GET", "/rest-api/keys"),
    ("POST", "/rest-api/add-key"),
    ("PATCH", "/rest-api/edit-key/2"),
    ("GET", "/settings/general"),
    ("PUT", "/settings/advanced/edit"),
    ("PUT", "/settings/emails/uptime/edit"),
    ("POST", "/settings/cost-tracker/product-types/add"),
    ("GET", "/settings/tools/renew-connections/status"),
    ("GET", "/posts"),
    ("POST", "/posts/1/create"),
    ("PUT", "/pages/1/2/update-status"),
    ("GET", "/users"),
    ("POST", "/users/create"),
    ("POST", "/users/import"),
    ("PUT", "/users/update-admin-password"),
    ("POST", "/time-tracker/tasks/add"),
    ("POST", "/ssl-monitor/1"),
    ("GET", "/pro-reports/1/plugins"),
    ("POST", "/time-tracker/tasks/add"),
]
WRONG = {
    "slug": {"a": [1]},
    "name": ["x"],
    "page": "two",
    "per_page": -3,
    "status": 5,
    "include": "a,b",
    "create": "nope",
    "active": "maybe",
    "permissions": 7,
    "type": "everything",
    "period": "1h",
    "post_title": {"x": 1},
    "csv_file": 3,
    "password": [],
    "title": None,
    "websites": "x",
}


async def test_no_route_answers_with_its_own_500(lab: InProcessEmulator, rw: httpx.AsyncClient) -> None:
    problems = []
    for method, path in PATHS:
        attempts = [
            {"content": b"{broken", "headers": {"Content-Type": "application/json"}},
            {"json": [1, 2, 3]},
            {"content": b"--zzz\r\ngarbage", "headers": {"Content-Type": "multipart/form-data; boundary=zzz"}},
            {"content": b"\xff\xfe", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
            {"json": WRONG},
            {"params": {k: str(v) for k, v in WRONG.items()}},
            {
                "params": {
                    "search[a]": "x",
                    "period[]": "1",
                    "status[x]": "y",
                    "type[]": "a",
                    "page[]": "1",
                    "id[]": "1",
                }
            },
            {"data": {"slug[": "x", "name": "", "active": "1", "permissions": "x,y"}},
        ]
        for attempt in attempts:
            response = await rw.request(method, "/svc/v2" + path, **attempt)
            body = response.json()
            code = body.get("code") if isinstance(body, dict) else None
            if response.status_code >= 500 and code not in REAL_500_CODES:
                problems.append(f"{method} {path} {attempt}: {response.status_code} {body}")
            if response.status_code >= 400 and not (isinstance(body, dict) and {"code", "message"} <= set(body)):
                problems.append(f"{method} {path}: error without the WordPress body: {body}")
    assert not problems, "\n".join(problems[:20])


def wordpress_error(response: httpx.Response) -> str | None:
    """Why the answer is not a WordPress-style 4xx error body, or None when it is one."""
    if not 400 <= response.status_code < 500:
        return f"status {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        return f"not JSON: {response.text[:80]!r}"
    if not (isinstance(body, dict) and {"code", "message", "data"} <= set(body)):
        return f"not a WordPress error body: {body}"
    if body["data"] is not None and body["data"].get("status") != response.status_code:
        return f"data.status {body['data'].get('status')} != {response.status_code}"
    return None


BODY_ATTEMPTS = [
    {"content": b"{broken", "headers": {"Content-Type": "application/json"}},
    {"content": b"\xff\xfe", "headers": {"Content-Type": "application/json"}},
    {"json": {"input": {"site_id_or_domain": ["not", "a", "site"], "no_such_param": 1}}},
    {"json": {"input": {"per_page": "many", "page": -1, "tag_id": "x"}}},
    {"json": {"input": "just a string"}},
]
QUERY_ATTEMPTS = [
    {"params": {"input": "{not json"}},
    {"params": {"input": '{"per_page": "many", "no_such_param": 1}'}},
    {"params": {"input[per_page]": "x", "input[no_such_param]": "1"}},
    {"params": {"input": '"just a string"'}},
]
ABILITY_RUNS = [
    ("GET", "svc/list-sites-v1"),
    ("GET", "svc/get-site-v1"),
    ("POST", "svc/sync-sites-v1"),
    ("POST", "svc/run-updates-v1"),
    ("GET", "svc/list-updates-v1"),
    ("POST", "svc/add-tag-v1"),
    ("DELETE", "svc/delete-tag-v1"),
    ("GET", "svc/get-client-v1"),
    ("GET", "svc/get-batch-job-status-v1"),
    ("GET", "core/get-site-info"),
]
V1_CALLS = [
    ("GET", "/svc/v1/sites/all-sites"),
    ("GET", "/svc/v1/sites/get-sites-by-url"),
    ("POST", "/svc/v1/sites/sync-sites"),
    ("POST", "/svc/v1/site/sync-site"),
    ("PUT", "/svc/v1/site/update-site"),
]


async def test_malformed_ability_input_is_a_wordpress_style_4xx(lab: InProcessEmulator) -> None:
    """Broken JSON, wrong types and unknown parameters on a sample of abilities, where each method reads its
    input (GET and DELETE: the query; POST: the body). Ground-truth routes: see test_ground_truth."""
    user = lab.credentials["application_password"]
    problems = []
    async with lab.client(auth=(user["username"], user["password"])) as abilities:
        for method, name in ABILITY_RUNS:
            for attempt in BODY_ATTEMPTS if method == "POST" else QUERY_ATTEMPTS:
                response = await abilities.request(method, f"/wp-abilities/v1/abilities/{name}/run", **attempt)
                if (reason := wordpress_error(response)) is not None:
                    problems.append(f"{method} {name} {attempt}: {reason}")
        for path in ("/wp-abilities/v1/abilities?per_page=500", "/wp-abilities/v1/abilities?page=x",
                     "/wp-abilities/v1/abilities/svc/nope", "/wp-abilities/v1/categories/nope"):
            if (reason := wordpress_error(await abilities.get(path))) is not None:
                problems.append(f"GET {path}: {reason}")
    assert not problems, "\n".join(problems[:20])


async def test_malformed_input_to_legacy_v1_never_breaks_it(lab: InProcessEmulator) -> None:
    """v1 answers with its own error bodies (`{"ERROR": ...}`) or ignores what it does not read, as the real one;
    it must never answer with a 5xx or anything but JSON."""
    v1 = lab.credentials["v1"]
    keys = {"consumer_key": v1["consumer_key"], "consumer_secret": v1["consumer_secret"]}
    problems = []
    async with lab.client() as client:
        for method, path in V1_CALLS:
            for attempt in [*BODY_ATTEMPTS[:2], {"params": {"site_id": "x", "url[]": "a", "unknown": "1"}}]:
                params = {**keys, **attempt.get("params", {})}
                response = await client.request(method, path, **{**attempt, "params": params})
                try:
                    response.json()
                except ValueError:
                    problems.append(f"{method} {path} {attempt}: not JSON: {response.text[:80]!r}")
                if response.status_code >= 500:
                    problems.append(f"{method} {path} {attempt}: {response.status_code} {response.text[:120]}")
    assert not problems, "\n".join(problems[:20])


DEEP = b"[" * 100_000 + b"]" * 100_000  # 200 KB of JSON nested 100,000 deep
# past json_decode's 512 and within nginx's 8 KB request line (a longer one is nginx's 414: see the fuzzer's tests)
DEEP_QUERY = "[" * 600 + "]" * 600


async def test_json_nested_100000_deep_is_rest_invalid_json_on_every_route(
    lab: InProcessEmulator, rw: httpx.AsyncClient
) -> None:
    """PHP's json_decode stops at depth 512; WordPress answers 400 rest_invalid_json, never a 500."""
    json_type = {"Content-Type": "application/json"}
    user = lab.credentials["application_password"]
    problems = []
    for method, path in [*PATHS, *[(m, p.removeprefix("/svc/v1")) for m, p in V1_CALLS]]:
        response = await rw.request(method, "/svc/v2" + path, content=DEEP, headers=json_type)
        if response.status_code == 404 and response.json()["code"] == "rest_no_route":
            continue  # the v1 paths are not v2 routes
        if response.status_code != 400 or response.json()["code"] != "rest_invalid_json":
            problems.append(f"{method} {path}: {response.status_code} {response.text[:120]}")
    async with lab.client(auth=(user["username"], user["password"])) as abilities:
        for method, name in ABILITY_RUNS:
            url = f"/wp-abilities/v1/abilities/{name}/run"
            attempts = [{"content": b'{"input":' + DEEP + b"}", "headers": json_type}] if method == "POST" else [
                {"params": {"input": DEEP_QUERY}}]
            for attempt in attempts:
                response = await abilities.request(method, url, **attempt)
                body = response.json()
                if response.status_code != 400 or body["code"] != "rest_invalid_json" \
                        or body["data"]["json_error_code"] != 1:
                    problems.append(f"{method} {name}: {response.status_code} {response.text[:120]}")
    admin = {"X-Emulator-Token": lab.credentials["admin_token"]}
    async with httpx.AsyncClient(transport=lab.transport, base_url=lab.root_url, headers=admin) as truth:
        response = await truth.post("/__emulator__/faults/items", content=DEEP)
        if response.status_code != 400 or "JSON" not in response.json()["message"]:
            problems.append(f"ground truth: {response.status_code} {response.text[:120]}")
    assert not problems, "\n".join(problems[:20])


async def test_a_field_of_the_wrong_type_is_refused_and_not_stored(
    lab: InProcessEmulator, rw: httpx.AsyncClient
) -> None:
    before = lab.emulator.state.sites[1].name
    response = await rw.post("/svc/v2/sites/1/edit", json={"name": {"x": [1]}})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "rest_invalid_param" and body["message"] == "Invalid parameter(s): name"
    assert body["data"]["params"] == {"name": "name is not of type string."}
    assert body["data"]["details"]["name"]["code"] == "rest_invalid_type"
    assert lab.emulator.state.sites[1].name == before
    assert (await rw.get("/svc/v2/sites/1")).json()["data"]["name"] == before


async def count_sites_while(client: httpx.AsyncClient, busy: asyncio.Task[httpx.Response]) -> list[float]:
    """Latencies of cheap requests sent one after another while `busy` is in progress."""
    latencies = []
    while not busy.done():
        started = time.monotonic()
        answer = await run(client, "svc/count-sites-v1")
        assert answer.status_code == 200
        latencies.append(time.monotonic() - started)
        await asyncio.sleep(0.02)
    return latencies


async def test_a_million_site_ids_are_refused_by_the_gateway_and_hold_nobody_up() -> None:
    """About 8 MB of input: past nginx's client_max_body_size (1 MiB), answered 413 without a PHP worker."""
    body = json.dumps({"input": {"site_ids_or_domains": list(range(1, 1_000_001))}}).encode()
    assert len(body) > 7_000_000
    config = EmulatorConfig(namespace="svc", sites=30, seed=3, time_scale=0.001)
    async with dashboard(config) as board, board.client() as client:
        huge = asyncio.create_task(client.post("/abilities/svc/sync-sites-v1/run", content=body,
                                               headers={"Content-Type": "application/json"}))
        latencies = await count_sites_while(client, huge)
        answer = huge.result()
        ledger = board.emulator.capacity.snapshot()
    assert answer.status_code == 413 and "413 Request Entity Too Large" in answer.text
    assert ledger["operations"].get("sync", 0) == 0
    assert max(latencies, default=0.0) < 1.0


async def test_a_large_input_is_read_off_the_event_loop() -> None:
    """Without a body limit, 50,000 site ids take their time on one worker while other requests keep answering
    within a second (before: decoding and validating them held the whole server up for seconds)."""
    body = json.dumps({"input": {"site_ids_or_domains": list(range(1, 50_001))}}).encode()
    config = EmulatorConfig(namespace="svc", sites=30, seed=3, time_scale=0.001, max_body_bytes=0,
                            gateway_timeout=0)
    async with dashboard(config) as board, board.client(timeout=120) as client:
        large = asyncio.create_task(client.post("/abilities/svc/sync-sites-v1/run", content=body,
                                                headers={"Content-Type": "application/json"}))
        latencies = await count_sites_while(client, large)
        answer = large.result()
    assert answer.status_code == 200 and answer.json()["total_errors"] >= 50_000 - 30
    assert len(latencies) >= 3 and max(latencies) < 1.0


# ---- what an API fuzzer (schemathesis, from the real dashboard's OpenAPI file) found -------------------------


async def test_a_csv_with_a_bare_carriage_return_is_read_as_php_reads_it(rw: httpx.AsyncClient) -> None:
    csv_text = "username,email,role,site_ids\rann,ann@example.com,editor,1\rbob,bob@example.com,author,1"
    answer = await rw.post("/svc/v2/users/import", json={"csv_file": csv_text, "has_header": True})
    assert answer.status_code == 200, answer.text  # was a 500 (_csv.Error: new-line character in unquoted field)
    assert len(answer.json()["data"]) == 2


async def test_a_query_nested_past_phps_limit_is_dropped_not_a_500(lab: InProcessEmulator) -> None:
    user = lab.credentials["application_password"]
    key = "input[site_id_or_domain]" + "[x]" * 600
    async with lab.client(auth=(user["username"], user["password"])) as abilities:
        answer = await abilities.get("/wp-abilities/v1/abilities/svc/get-site-v1/run", params={key: "1"})
    assert answer.status_code == 400, answer.text  # was a 500 (RecursionError); PHP drops the variable
    assert answer.json()["code"] in ("ability_invalid_input", "rest_invalid_param")


async def test_json_with_a_lone_surrogate_is_refused_as_json_decode_does(rw: httpx.AsyncClient) -> None:
    before = (await rw.get("/svc/v2/sites/1")).json()["data"]["name"]
    answer = await rw.post("/svc/v2/sites/1/edit", content=b'{"name": "bad \\ud800 name"}',
                           headers={"Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.json()["code"] == "rest_invalid_json"
    assert answer.json()["data"]["json_error_code"] == 10  # JSON_ERROR_UTF16
    assert (await rw.get("/svc/v2/sites/1")).json()["data"]["name"] == before  # was stored
    paired = await rw.post("/svc/v2/sites/1/edit", content=b'{"name": "ok \\ud83d\\ude00"}',
                           headers={"Content-Type": "application/json"})
    assert paired.status_code == 200  # a surrogate pair is one character, as PHP decodes it


async def test_a_request_line_past_nginxs_buffers_is_its_414_over_a_real_socket() -> None:
    config = EmulatorConfig(namespace="svc", sites=5, seed=1)
    async with EmulatorServer(config) as server, httpx.AsyncClient(base_url=server.base_url) as client:
        answer = await client.get("/svc/v2/sites", params={"search": "x" * 20_000})
        fine = await client.get("/svc/v2/sites", params={"search": "x" * 100})
    assert answer.status_code == 414 and "414 Request-URI Too Large" in answer.text  # was a reset connection
    assert fine.status_code in (200, 401)
