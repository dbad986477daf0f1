"""Every captured answer of the real dashboard parses into the client's model or maps to its typed error.

The parsers are the client's own (`dashboard.rest`, `dashboard.abilities`, `dashboard.models`); a file that
fits no model must be listed in UNMODELLED with the reason the client does not read that answer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dashboard import errors as e
from dashboard import rest
from dashboard.abilities import ability_page
from dashboard.errors import error_from_response
from dashboard.models import (
    Ability,
    AbilityCategory,
    BatchStart,
    CheckResult,
    Client,
    IgnoredList,
    IgnoreResult,
    JobStatus,
    PendingUpdate,
    Site,
    SiteHealth,
    SiteItemsUpdate,
    SiteUpdates,
    SyncResult,
    Tag,
    UpdateListPage,
    UpdateRunResult,
    UpdateType,
)
from tests.reference import EXCHANGES, announce, require_reference

ID = r"[^/]+"


def items_of(model: Any) -> Any:
    return lambda body: [model.model_validate(row) for row in body["items"]]


def pending(body: Any) -> list[PendingUpdate]:
    return [PendingUpdate.model_validate(row) for row in body["data"]]


def site_items(kind: UpdateType) -> Any:
    return lambda body: SiteItemsUpdate.from_body("1", kind, body)


# (method, path pattern after the namespace root) -> parser, first match wins. Abilities paths start with AB.
PARSERS: list[tuple[str, str, Any]] = [
    ("GET", r"/sites", rest.site_page),
    ("GET", r"/sites/basic", rest.site_page),
    ("POST", rf"/sites/{ID}/(sync|edit|reconnect)", rest.site_of),
    ("POST", r"/sites/add", rest.site_of),
    ("POST", rf"/sites/{ID}/check", rest.site_check),
    ("GET", r"/sites/count", rest.count_of),
    ("GET", r"/sites/all-sites-count", rest.count_of),
    ("GET", r"/sites/all-sites", rest.sites_keyed),
    ("GET", rf"/sites/{ID}", rest.site_of),
    ("POST", r"/sites/(sync|check)", rest.sites_keyed),
    ("GET", rf"/sites/{ID}/(plugins|themes)", rest.plugin_list),
    ("GET", rf"/sites/{ID}/client", rest.client_of),
    ("GET", r"/tags", rest.tag_page),
    ("GET", rf"/tags/{ID}", rest.tag_of),
    ("POST", r"/tags/add", rest.tag_of),
    ("POST", rf"/tags/{ID}/edit", rest.tag_of),
    ("DELETE", rf"/tags/{ID}/remove", rest.tag_of),
    ("GET", rf"/tags/{ID}/sites", rest.site_page),
    ("POST", r"/(tags/)?batch", rest.batch_answer),
    ("GET", r"/clients", rest.client_page),
    ("GET", r"/clients/count", rest.count_of),
    ("GET", rf"/clients/{ID}", rest.client_of),
    ("POST", r"/clients/add", rest.client_of),
    ("GET", rf"/clients/{ID}/sites", rest.site_page),
    ("GET", rf"/clients/{ID}/sites/count", rest.count_of),
    ("GET", r"/monitors(/basic)?", rest.monitor_page),
    ("GET", r"/monitors/count", rest.count_of),
    ("GET", rf"/monitors/{ID}(/basic)?", rest.monitor_of),
    ("GET", rf"/monitors/{ID}/heartbeat", rest.heartbeats),
    ("GET", rf"/monitors/{ID}/incidents", rest.incidents),
    ("GET", rf"/monitors/{ID}/incidents/count", rest.count_of),
    ("POST", rf"/monitors/{ID}/check", rest.monitor_check),
    ("PUT", rf"/monitors/{ID}/settings", rest.settings_of),
    ("GET", r"/rest-api/keys", rest.key_page),
    ("POST", r"/rest-api/add-key", rest.new_key),
    ("PUT", rf"/rest-api/edit-key/{ID}", rest.action_message),
    ("DELETE", rf"/rest-api/delete-key/{ID}", rest.action_message),
    ("GET", r"/settings/(general|advanced|monitoring|tools|emails/[^/]+)", rest.settings_of),
    ("POST", r"/settings/tools/renew-connections", rest.action_message),
    ("GET", rf"/settings/tools/renew-connections-status/{ID}", rest.action_message),
    ("GET", r"/updates", pending),
    ("POST", rf"/updates/{ID}/update/plugins", site_items(UpdateType.plugin)),
    ("POST", rf"/updates/{ID}/update/themes", site_items(UpdateType.theme)),
    ("POST", rf"/updates/{ID}/update/translations", site_items(UpdateType.translation)),
    ("POST", rf"/updates/{ID}/ignore/(plugins|themes)", rest.action_message),
    ("GET", r"AB/abilities", lambda body: ability_page(body, None)),
    ("GET", r"AB/abilities/[^/]+/[^/]+", Ability.from_body),
    ("GET", r"AB/categories", lambda body: [AbilityCategory.model_validate(c) for c in body]),
    ("GET", rf"AB/categories/{ID}", AbilityCategory.model_validate),
    ("GET", r"AB/run/list-sites-v1", items_of(Site)),
    ("GET", r"AB/run/get-site-v1", Site.model_validate),
    ("GET", r"AB/run/get-client-sites-v1", items_of(Site)),
    ("GET", r"AB/run/list-clients-v1", items_of(Client)),
    ("GET", r"AB/run/get-client-v1", Client.model_validate),
    ("GET", r"AB/run/get-site-client-v1", lambda b: b["client"] and Client.model_validate(b["client"])),
    ("GET", r"AB/run/list-tags-v1", items_of(Tag)),
    ("POST", r"AB/run/add-tag-v1", Tag.model_validate),
    ("GET", r"AB/run/count-(sites|clients)-v1", rest.count_of),
    ("GET", r"AB/run/get-batch-job-status-v1", JobStatus.model_validate),
    ("GET", r"AB/run/list-updates-v1", UpdateListPage.model_validate),
    ("GET", r"AB/run/get-site-updates-v1", SiteUpdates.model_validate),
    ("GET", r"AB/run/list-ignored-updates-v1", IgnoredList.model_validate),
    ("POST", r"AB/run/sync-sites-v1", lambda b: BatchStart.parse(b, SyncResult)),
    ("POST", r"AB/run/check-sites-v1", lambda b: BatchStart.parse(b, CheckResult)),
    ("POST", r"AB/run/(run-updates|update-all)-v1", lambda b: BatchStart.parse(b, UpdateRunResult)),
    ("POST", r"AB/run/update-site-(plugins|themes|translations)-v1", UpdateRunResult.model_validate),
    ("POST", r"AB/run/check-site-v1", SiteHealth.model_validate),
    ("POST", r"AB/run/ignore-site-plugins-v1", IgnoreResult.model_validate),
]

# Answers the client deliberately does not read, and why.
UNMODELLED = {
    "v2-sites-sync-all-queued": "REST sync of all sites; many sites are synced through sync-sites-v1",
    "v2-sites-id-security": "the child's security report is passed through as is; no client method reads it",
    "v2-updates-site": "raw child plugin headers; per-site updates are read through get-site-updates-v1",
    "v2-updates-site-1-before-success": "as v2-updates-site",
    "v2-updates-site-1-translation-pending": "as v2-updates-site",
    "v2-updates-site-update-all-success": "`summary` is always []; the client updates through the abilities",
    "v2-updates-update-all-sites-success": "dashboard-wide REST update; the client uses update-all-v1",
    "v2-updates-update-all-sites-queued": "`queued_count` always 0; the client queues through the abilities",
    "v2-updates-update-all-sites-queued-again": "as v2-updates-update-all-sites-queued",
    "v2-updates-site-ignore-plugins-plain-slug-BUG": "the buggy plain-slug ignore; the client ignores via abilities",
    "ab-run-core-get-site-info": "WordPress core ability: run_ability returns its raw output",
    "ab-run-delete-site-v1-dry-run": "destructive abilities are run only through run_ability (raw output)",
    "ab-run-delete-tag-v1-dry-run": "as ab-run-delete-site-v1-dry-run",
    "ab-run-delete-tag-v1-confirm": "as ab-run-delete-site-v1-dry-run",
}

# Error answers and the typed error each must raise.
EXPECTED_ERRORS: dict[str, type[e.DashboardError]] = {
    "ab-abilities-per_page101": e.InvalidInput,
    "ab-ability-unknown": e.AbilityNotFound,
    "ab-auth-mainwp-bearer": e.AuthenticationError,
    "ab-auth-missing": e.AuthenticationError,
    "ab-auth-wrong-app-password": e.AuthenticationError,
    "ab-run-add-tag-v1-bad-color": e.InvalidInput,
    "ab-run-auth-missing": e.AuthenticationError,
    "ab-run-delete-site-v1-no-confirm": e.ConfirmationRequired,
    "ab-run-delete-tag-v1-no-confirm": e.ConfirmationRequired,
    "ab-run-get-batch-job-status-v1-bad-pattern": e.InvalidInput,
    "ab-run-get-batch-job-status-v1-missing": e.InvalidInput,
    "ab-run-get-batch-job-status-v1-unknown": e.JobNotFound,
    "ab-run-get-site-v1-missing-input": e.InvalidInput,
    "ab-run-get-site-v1-unknown-domain": e.SiteNotFound,
    "ab-run-get-site-v1-unknown": e.SiteNotFound,
    "ab-run-list-sites-v1-bad-input": e.InvalidInput,
    "ab-run-list-sites-v1-extra-prop": e.InvalidInput,
    "ab-run-wrong-method-get-write": e.MethodNotAllowed,
    "ab-run-wrong-method-post-destructive-idempotent": e.MethodNotAllowed,
    "ab-run-wrong-method-post-readonly": e.MethodNotAllowed,
    "v1-sites-all-sites-bearer": e.AuthenticationError,
    "v1-sites-all-sites-no-auth": e.AuthenticationError,
    "v1-sites-all-sites-wrong-secret": e.AuthenticationError,
    "v1-sites-bare": e.RouteNotFound,
    "v2-auth-app-password": e.AuthenticationError,
    "v2-auth-disabled-key": e.AuthenticationError,
    "v2-auth-garbage-bearer": e.AuthenticationError,
    "v2-auth-missing": e.AuthenticationError,
    "v2-auth-readonly-delete": e.PermissionDenied,
    "v2-auth-readonly-post": e.PermissionDenied,
    "v2-auth-unknown-key": e.AuthenticationError,
    "v2-auth-wrong-secret": e.AuthenticationError,
    "v2-jobs-status-url-404": e.RouteNotFound,
    "v2-monitors-id-heartbeat-bad-period": e.InvalidInput,
    "v2-monitors-id-heartbeat-none": e.ActionFailed,  # monitor_heartbeats turns this one into []
    "v2-monitors-id-unknown": e.MonitorNotFound,
    "v2-rest-api-add-key-bad-permissions": e.InvalidInput,
    "v2-rest-api-add-key-json-body": e.InvalidInput,
    "v2-rest-api-add-key-missing-active": e.InvalidInput,
    "v2-rest-api-delete-key-again": e.ApiKeyNotFound,
    "v2-rest-api-edit-key-form-body": e.InvalidInput,
    "v2-rest-api-edit-key-post-method": e.RouteNotFound,
    "v2-rest-api-edit-key-unknown": e.ApiKeyNotFound,
    "v2-settings-tools-renew-connections-status-unknown": e.NotFound,
    "v2-sites-add-error-child-requires-password": e.ActionFailed,
    "v2-sites-id-client-none": e.NotFound,
    "v2-sites-id-client": e.NotFound,
    "v2-sites-id-unknown": e.PermissionDenied,  # get_site reports this 6.1.2 quirk as SiteNotFound
    "v2-tags-add-empty-name": e.ActionFailed,
    "v2-tags-id-delete-wrong-route": e.RouteNotFound,
    "v2-tags-id-edit-unknown": e.TagNotFound,
    "v2-tags-id-remove-again": e.TagNotFound,
    "v2-tags-id-remove-with-post": e.RouteNotFound,
    "v2-tags-id-unknown": e.TagNotFound,
    "v2-unknown-route": e.RouteNotFound,
    "v2-updates-ignored-empty": e.InvalidInput,
    "v2-updates-ignored": e.InvalidInput,
    "v2-updates-site-ignored": e.InvalidInput,
    "v2-updates-site-update-plugins-no-slug": e.NothingToUpdate,
    "v2-updates-site-update-themes-no-slug": e.NothingToUpdate,
}


def route_key(path: str) -> str:
    path = path.split("?")[0]
    path = re.sub(r"^/wp-json/(mainwp|svc)/v[12]", "", path)
    path = re.sub(r"^/wp-json/wp-abilities/v1/abilities/[^/]+/([^/]+)/run$", r"AB/run/\1", path)
    return re.sub(r"^/wp-json/wp-abilities/v1", "AB", path)


def parser_for(method: str, path: str) -> Any:
    method = "PUT" if method == "PATCH" else method
    for want_method, pattern, parser in PARSERS:
        if want_method == method and re.fullmatch(pattern, path):
            return parser
    return None


def exchange_files() -> list[Path]:
    require_reference()
    return sorted(p for p in EXCHANGES.glob("*.json") if not p.name.startswith("_"))


def test_every_real_exchange_parses_or_maps_to_its_typed_error() -> None:
    files = exchange_files()
    assert len(files) >= 270, f"expected the 270 captured exchanges, found {len(files)}"
    parsed, typed_errors, unmodelled, failures = 0, 0, 0, []
    for file in files:
        name = file.stem
        exchange = json.loads(file.read_text())
        request, response = exchange["request"], exchange["response"]
        path = route_key(request["path"])
        error = error_from_response(response["status"], response["body"], method=request["method"],
                                    path=request["path"].split("?")[0])
        if error is not None:
            expected = EXPECTED_ERRORS.get(name)
            if expected is None or type(error) is not expected:
                failures.append(f"{name}: got {type(error).__name__}, expected {getattr(expected, '__name__', None)}")
            elif not (error.method and error.path and error.message):
                failures.append(f"{name}: the error does not name its call: {error}")
            else:
                typed_errors += 1
            continue
        if name in EXPECTED_ERRORS:
            failures.append(f"{name}: expected {EXPECTED_ERRORS[name].__name__}, but the answer was read as success")
            continue
        if name in UNMODELLED:
            unmodelled += 1
            continue
        parser = parser_for(request["method"], path)
        if parser is None:
            failures.append(f"{name}: no model for {request['method']} {path}")
            continue
        try:
            parser(response["body"])
            parsed += 1
        except Exception as exc:  # noqa: BLE001 - every failure is reported with its file
            failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
    announce(f"client models: {len(files)} files, {parsed} parsed into models, {typed_errors} typed errors, "
             f"{unmodelled} not read by the client (with reasons)")
    assert not failures, "\n".join(failures)
    assert parsed + typed_errors + unmodelled == len(files)


def test_unmodelled_and_error_tables_name_real_files() -> None:
    names = {p.stem for p in exchange_files()}
    assert set(UNMODELLED) <= names
    assert set(EXPECTED_ERRORS) <= names


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("v2-sites", lambda b: rest.site_page(b).items[0].id == 1 and rest.site_page(b).total == 2),
        ("v2-sites-with-tag", lambda b: rest.site_of(b).tags == {1: "Lab Tag Renamed"}),
        ("v2-sites", lambda b: rest.site_page(b).items[0].last_sync.tzinfo is not None),
        ("v2-sites", lambda b: isinstance(rest.site_page(b).items[0].plugins, list)),
        ("v2-tags", lambda b: [t.id for t in rest.tag_page(b).items] == [1, 2]),
        ("v2-tags-id-edit", lambda b: rest.tag_of(b).sites_ids == [] and rest.tag_of(b).sites_count is None),
        ("v2-updates", lambda b: {u.type for u in pending(b)} <= set(UpdateType)),
        ("ab-run-list-updates-v1-translation-pending", lambda b: UpdateListPage.model_validate(b).updates[0].type
         is UpdateType.translation),
        ("v2-rest-api-keys", lambda b: "Write & Delete" in rest.key_page(b).items[0].permissions),
        ("v2-rest-api-keys", lambda b: "redacted" not in repr(rest.key_page(b).items[0])),
        ("v2-clients-id-by-email", lambda b: rest.client_of(b).email == "client@example.com"),
        ("v2-sites-id-client-assigned", lambda b: rest.client_of(b).id == 1),
        ("v2-monitors-basic", lambda b: rest.monitor_page(b).items[0].id is None),
        ("ab-run-get-batch-job-status-v1-update-all-v1-completed",
         lambda b: JobStatus.model_validate(b).failed == 2 and JobStatus.model_validate(b).finished),
        ("ab-run-run-updates-v1-queued", lambda b: BatchStart.parse(b, UpdateRunResult).job_id.startswith("update_")),
        ("ab-run-check-sites-v1-queued-with-unknown-site",
         lambda b: BatchStart.parse(b, CheckResult).errors[0].identifier == "nosuch.example.com"),
        ("ab-run-sync-sites-v1", lambda b: BatchStart.parse(b, SyncResult).result.total_synced == 2),
    ],
)
def test_tolerant_models_read_the_real_types(name: str, check: Any) -> None:
    body = json.loads((EXCHANGES / f"{name}.json").read_text())["response"]["body"]
    assert check(body)


def test_rest_partial_failure_merges_the_url_encoded_duplicate() -> None:
    body = json.loads((EXCHANGES / "v2-updates-site-update-plugins-partial-failure.json").read_text())
    result = SiteItemsUpdate.from_body("1", UpdateType.plugin, body["response"]["body"])
    by_slug = {item.slug: item for item in result.items}
    assert set(by_slug) == {"lab-extra/lab-extra.php", "lab-widget/lab-widget.php"}
    failed = by_slug["lab-extra/lab-extra.php"]
    assert not failed.success and failed.error == "Download failed." and not failed.installed
    assert by_slug["lab-widget/lab-widget.php"].installed


def test_stale_success_is_not_an_install() -> None:
    body = json.loads((EXCHANGES / "v2-updates-site-update-plugins-stale-reports-success.json").read_text())
    (item,) = SiteItemsUpdate.from_body("1", UpdateType.plugin, body["response"]["body"]).items
    assert item.success and not item.installed


def test_one_odd_row_is_skipped_and_named_not_fatal(caplog: pytest.LogCaptureFixture) -> None:
    body = json.loads((EXCHANGES / "ab-run-list-updates-v1.json").read_text())["response"]["body"]
    rows = body["updates"]
    rows[0] = {**rows[0], "type": "premium-addon", "site_id": 77}
    page = UpdateListPage.model_validate(body)
    assert len(page.updates) == len(rows) - 1
    assert any("PendingUpdate" in r.getMessage() and "77" in r.getMessage() for r in caplog.records)
