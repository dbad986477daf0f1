"""Bad input anywhere gets a WordPress-style answer, never a traceback or a 500 from the emulator itself
(the only 500s are the real dashboard's own: errors without a status, and its ability-delegation bugs)."""

from __future__ import annotations

import httpx

from emulator.testing import InProcessEmulator

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
