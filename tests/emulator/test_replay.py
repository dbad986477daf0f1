"""Replay every captured REST exchange (v1-*, v2-*) against a fresh `mainwp` emulator set up like the lab
(two sites, the lab's plugins and themes, keys 1-5, client 1 on site 1, monitors with one incident) and
compare status and shape: keys and JSON types at every level (values may differ)."""

from __future__ import annotations

import base64
import json
import secrets
import time
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

import httpx

from emulator.app import Emulator
from emulator.auth import create_api_key
from emulator.config import EmulatorConfig
from emulator.records import Heartbeat, Item
from emulator.testing import InProcessEmulator
from tests.reference import EXCHANGES, announce, require_reference

SKIPPED = {
    "v2-tags-id-delete-wrong-route": "deliberate: the spec's DELETE /tags/{id}/delete is served as well as /remove",
}
WITH_TAG = ("v2-tags-id-sites", "v2-sites-with-tag", "v2-sites-id-with-client", "v2-batch", "v2-sites-id-edit-set-tag")
QUEUED = ("v2-sites-sync-all-queued", "v2-updates-update-all-sites-queued", "v2-updates-update-all-sites-queued-again")
NEVER_CHECKED = ("v2-monitors-id-before-check", "v2-monitors")


class Lab(Protocol):
    """An emulator under replay: an `InProcessEmulator`, or the abilities harness's `Dashboard`."""

    @property
    def emulator(self) -> Emulator: ...

    @property
    def credentials(self) -> dict[str, Any]: ...


def lab_setup(lab: Lab, name: str) -> None:
    """Shape the generated 2-site fleet into the lab's dashboard for exchange `name`."""
    state, ops = lab.emulator.state, lab.emulator.operations
    now = time.time()
    for site in state.sites.values():
        site.reachable, site.child_connected, site.suspended, site.sync_errors = True, True, False, ""
        site.http_code = 200
        site.plugins = {
            "akismet/akismet.php": Item(
                "akismet/akismet.php",
                "Akismet Anti-spam: Spam Protection",
                "5.7",
                offer="99.1.0",
                known_version="5.7",
                known_offer="99.1.0",
            ),
            "hello.php": Item("hello.php", "Hello Dolly", "1.7.2", known_version="1.7.2"),
            "lab-widget/lab-widget.php": Item(
                "lab-widget/lab-widget.php", "Lab Widget", "1.0.0", True, "1.1.0", "1.0.0", "1.1.0"
            ),
            "lab-extra/lab-extra.php": Item(
                "lab-extra/lab-extra.php", "Lab Extra", "1.0.0", True, "1.1.0", "1.0.0", "1.1.0"
            ),
        }
        site.themes = {
            "twentytwentyfive": Item("twentytwentyfive", "Twenty Twenty-Five", "1.5", True, None, "1.5"),
            "twentytwentythree": Item("twentytwentythree", "Twenty Twenty-Three", "1.6", False, "99.0", "1.6", "99.0"),
            "lab-theme": Item("lab-theme", "Lab Theme", "1.0.0", False, "1.1.0", "1.0.0", "1.1.0"),
        }
        site.translations = {"lab-widget": Item("lab-widget", "Lab Widget", "1.5.0", False, "1.5.0", "1.5.0", "1.5.0")}
        site.ignored_plugins = {}
        site.tag_ids = [1] if site.id == 1 and name in WITH_TAG else []
        site.client_id = 1 if site.id == 1 else 0
        assert site.monitor is not None
        site.monitor.heartbeats = [
            Heartbeat(i + 1, 1, "200 - up! OK", 1, now - 600 + i * 60, 20, 200) for i in range(3)
        ]
        state.save_site(site)
    incident = state.sites[2].monitor
    assert incident is not None
    incident.heartbeats += [
        Heartbeat(10, 0, "200 - up! OK. Keyword not found.", 1, now - 30, 37, 200),
        Heartbeat(11, 1, "200 - up! OK", 1, now - 20, 14, 200),
    ]
    state.edit_client(state.clients[1], client_email="client@example.com")
    while max(state.api_keys) < 5:
        create_api_key(state, "lab key made over REST", "read_write")
    state.save_tool_job(
        "renew_6b01779ae14a85.84448659",
        {"tool": "renew-connections", "total": 2, "processed": 2, "failed": 0, "errors": [], "completed_at": int(now)},
    )
    site1 = state.sites[1]
    if name in QUEUED:  # captured with the lab's threshold of 1
        state.set_option("mainwp_abilities_batch_threshold", 1)
    if name in NEVER_CHECKED:
        for site in state.sites.values():
            assert site.monitor is not None
            site.monitor.last_status_code = None
    if name == "v2-tags-empty":
        for tag in list(state.tags.values()):
            state.delete_tag(tag)
    elif name == "v2-clients-empty":
        for client in list(state.clients.values()):
            state.delete_client(client)
    elif name in ("v2-tags-id-remove-again",):
        state.delete_tag(state.tags[2])
    elif name == "v2-rest-api-delete-key-again":
        state.delete_api_key(state.api_keys[4])
    elif name == "v2-updates-site-update-plugins-partial-failure":
        ops.set_item_fault(site1, "plugin", "lab-extra/lab-extra.php", "fail")
    elif name in ("v2-updates-site-update-themes-404-failure", "v2-updates-site-update-themes-fails"):
        ops.set_item_fault(site1, "theme", "lab-theme", "fail")
        ops.set_item_fault(site1, "theme", "twentytwentythree", "fail")
    elif name == "v2-updates-site-update-plugins-stale-reports-success":
        site1.plugins["lab-extra/lab-extra.php"].offer = None
    elif name == "v2-sites-id-client":
        site1.client_id = 0
    elif name == "v2-updates-site":  # before the lab packages were planted
        for site in state.sites.values():
            for item in [*site.plugins.values(), *site.themes.values()]:
                if item.slug.startswith("lab-"):
                    item.offer = item.known_offer = None
        state.sites[2].plugins["akismet/akismet.php"].offer = None
        state.sites[2].plugins["akismet/akismet.php"].known_offer = None
    elif name == "v2-updates-site-1-before-success":
        state.ignore_items(site1, "plugin", ["akismet/akismet.php"])
        site1.themes["twentytwentythree"].offer = site1.themes["twentytwentythree"].known_offer = None
    elif name == "v2-sites-id-client-none":
        state.sites[2].client_id = 0


def lab_request(lab: Lab, request: dict[str, Any]) -> tuple[str, str, dict[str, str], Any]:
    """The captured request with the redacted credentials replaced by this emulator's."""
    creds = lab.credentials
    boot = lab.emulator.state.meta["bootstrap"]["api_keys"]
    path: str = request["path"].removeprefix("/wp-json")
    path = path.replace("ck_<redacted-read_write-key>", boot["read_write"]["consumer_key"]).replace(
        "cs_<redacted-read_write-secret>", boot["read_write"]["consumer_secret"]
    )
    auth = request.get("auth") or "none"
    headers: dict[str, str] = {}
    tokens = {
        "<read_write token>": creds["api_keys"]["read_write"],
        "<read_only token>": creds["api_keys"]["read"],
        "<disabled token>": creds["api_keys"]["disabled"],
    }
    if auth.startswith("Bearer "):
        value = auth[7:]
        if value in tokens:
            value = tokens[value]
        elif value == "<unknown secret>==<unknown key>":
            value = f"{secrets.token_hex(20)}=={secrets.token_hex(20)}"
        elif value == "<wrong secret>==<valid read_write key>":
            value = f"{'0' * 40}=={boot['read_write']['consumer_key'][3:]}"
        headers["Authorization"] = "Bearer " + value
    elif auth.startswith("Basic ck:cs"):
        pair = f"{boot['read_write']['consumer_key']}:{boot['read_write']['consumer_secret']}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif auth.startswith("Basic admin:"):
        app = creds["application_password"]
        pair = f"{app['username']}:{app['password']}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    body = request.get("body")
    content_type = request.get("content_type")
    content: Any = None
    if body is not None and content_type:
        headers["Content-Type"] = content_type
        content = json.dumps(body) if "json" in content_type else urlencode(body)
    return request["method"], path, headers, content


def shape_problems(captured: Any, ours: Any, where: str = "$") -> list[str]:
    """Keys and JSON types at every level. Lists compare their first elements; an empty PHP array ([])
    matches an object; a null matches any scalar (nullable field); numbers are one type."""
    if captured is None or ours is None:
        scalar = (str, int, float, bool)
        if captured is None and (ours is None or isinstance(ours, scalar)):
            return []
        if ours is None and isinstance(captured, scalar):
            return []
        return [f"{where}: {type(captured).__name__} vs {type(ours).__name__}"]
    if isinstance(captured, dict) and isinstance(ours, list) and not ours:
        return []
    if isinstance(captured, list) and not captured and isinstance(ours, dict | list):
        return []
    if isinstance(captured, dict):
        if not isinstance(ours, dict):
            return [f"{where}: object vs {type(ours).__name__}"]
        if not captured or not ours:
            return []
        if all(k.isdigit() for k in captured) and all(k.isdigit() for k in ours):  # keyed by id
            return shape_problems(next(iter(captured.values())), next(iter(ours.values())), f"{where}.<id>")
        problems = []
        if set(captured) != set(ours):
            problems.append(
                f"{where}: keys missing {sorted(set(captured) - set(ours))}, extra {sorted(set(ours) - set(captured))}"
            )
        for key in set(captured) & set(ours):
            problems += shape_problems(captured[key], ours[key], f"{where}.{key}")
        return problems
    if isinstance(captured, list):
        if not isinstance(ours, list):
            return [f"{where}: array vs {type(ours).__name__}"]
        return shape_problems(captured[0], ours[0], f"{where}[0]") if captured and ours else []
    number = (int, float)
    if isinstance(captured, bool) or isinstance(ours, bool):
        return [] if type(captured) is type(ours) else [f"{where}: {type(captured).__name__} vs {type(ours).__name__}"]
    if isinstance(captured, number) and isinstance(ours, number):
        return []
    return [] if type(captured) is type(ours) else [f"{where}: {type(captured).__name__} vs {type(ours).__name__}"]


def exchange_files() -> list[Path]:
    return sorted(p for p in EXCHANGES.glob("v[12]-*.json"))


def answer_problems(expected: dict[str, Any], response: httpx.Response, headers: tuple[str, ...] = ()) -> list[str]:
    """How our answer differs from the captured one in status, shape and the named `headers` (their values, or
    their absence); empty when it matches."""
    got, wanted = response.status_code, expected["status"]
    captured = {k.lower(): v for k, v in (expected.get("headers") or {}).items()}
    header_problems = [f"{name} {response.headers.get(name)!r} != {captured.get(name.lower())!r}"
                       for name in headers if response.headers.get(name) != captured.get(name.lower())]
    return (([] if got == wanted else [f"status {got} != {wanted}"]) + header_problems
            + shape_problems(expected["body"], response.json()))


def report(label: str, problems: dict[str, list[str]], skipped: list[str]) -> None:
    """Print how many exchanges were replayed, matched and skipped, then fail on any mismatch."""
    failures = [f"{name}: {'; '.join(found[:4])}" for name, found in problems.items() if found]
    counts = f"{label}: replayed {len(problems)}, matched {len(problems) - len(failures)}, skipped {len(skipped)}"
    announce(counts)
    print("\n" + counts)
    for line in skipped:
        print("  skipped", line)
    for line in failures:
        print("  MISMATCH", line)
    assert not failures, "\n".join(failures)


async def test_replay_real_exchanges() -> None:
    require_reference()
    problems: dict[str, list[str]] = {}
    skipped = [f"{path.stem}: {SKIPPED[path.stem]}" for path in exchange_files() if path.stem in SKIPPED]
    for path in exchange_files():
        if path.stem in SKIPPED:
            continue
        exchange = json.loads(path.read_text())
        lab = InProcessEmulator(EmulatorConfig(namespace="mainwp", sites=2, seed=7, time_scale=1e-6))
        lab_setup(lab, path.stem)
        method, url, headers, content = lab_request(lab, exchange["request"])
        async with httpx.AsyncClient(transport=lab.transport, base_url=lab.root_url + "/wp-json") as client:
            response = await client.request(method, url, headers=headers, content=content)
        lab.close()
        problems[path.stem] = answer_problems(exchange["response"], response)
    report("REST exchanges", problems, skipped)
