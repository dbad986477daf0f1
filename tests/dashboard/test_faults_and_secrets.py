"""Retries under the emulator's fault injection, and no secret anywhere a human or a log could see it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dashboard import DashboardClient
from dashboard.errors import (
    AuthenticationError,
    ConfigurationError,
    DashboardError,
    OutcomeUnknown,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
)
from tests.dashboard.emulated import FAST_RETRIES, GroundTruth


@pytest.fixture
def faults(truth: GroundTruth) -> Any:
    """Switch the emulator's fault profile for one test, and back to none afterwards."""
    yield truth.faults
    truth.faults("none")


async def test_reads_survive_errors_throttling_and_dropped_connections(
    client: DashboardClient, truth: GroundTruth, faults: Any
) -> None:
    faults({"error_rate": 0.25, "throttle_rate": 0.15, "drop_rate": 0.1, "retry_after_seconds": 1})
    expected = len(truth.state()["sites"])
    for _ in range(15):
        assert await client.count_sites() == expected
    sites = await client.list_sites()
    updates = await client.list_updates()  # an idempotent ability, retried too
    counts = truth.fault_counts()
    assert len(sites) == expected and len(updates) == len(await client.list_updates())
    assert counts.get("errors", 0) and counts.get("throttled", 0) and counts.get("dropped", 0), counts


async def test_retry_after_is_honoured_within_the_cap(emulator: Any, truth: GroundTruth, faults: Any) -> None:
    faults({"throttle_rate": 1.0, "retry_after_seconds": 1})
    settings = {**FAST_RETRIES, "max_attempts": 3, "retry_cap": 0.05}
    async with DashboardClient.from_credentials(emulator.credentials, **settings) as dashboard:
        with pytest.raises(RateLimited) as caught:
            await dashboard.count_sites()
    assert caught.value.retry_after == 1 and caught.value.status == 429
    assert truth.fault_counts()["throttled"] == 3  # three tries, no more


async def test_idempotent_read_gives_up_with_a_typed_error(emulator: Any, truth: GroundTruth, faults: Any) -> None:
    faults({"error_rate": 1.0})
    async with DashboardClient.from_credentials(emulator.credentials, **{**FAST_RETRIES, "max_attempts": 4}) as d:
        with pytest.raises(ServerError) as caught:
            await d.count_sites()
    assert caught.value.status in (500, 502, 503, 504) and caught.value.path.endswith("/sites/count")
    assert truth.fault_counts()["errors"] == 4


async def test_a_write_whose_answer_is_lost_is_not_repeated(
    client: DashboardClient, truth: GroundTruth, faults: Any
) -> None:
    faults({"drop_rate": 1.0})
    with pytest.raises(OutcomeUnknown) as caught:
        await client.add_tag("Dropped answer tag")
    assert "re-read" in str(caught.value) and caught.value.method == "POST"
    assert truth.fault_counts()["dropped"] == 1  # sent once, never repeated
    faults("none")
    tags = [t for t in await client.list_tags() if t.name.startswith("Dropped answer tag")]
    assert len(tags) == 1  # the dashboard did apply it: the caller must re-read, as the error says


async def test_a_write_answered_5xx_is_outcome_unknown(client: DashboardClient, truth: GroundTruth,
                                                       faults: Any) -> None:
    plugin = (await client.list_updates(type="plugin"))[0]
    faults({"error_rate": 1.0})
    with pytest.raises(OutcomeUnknown):
        await client.run_updates([plugin.site_id], ["plugins"], [plugin.slug])  # not idempotent by annotation
    assert truth.fault_counts()["errors"] == 1


async def test_auth_failures_are_typed(emulator: Any) -> None:
    creds = emulator.credentials
    wrong = {**creds, "api_keys": {"read_write": "0" * 40 + "==" + "1" * 40},
             "application_password": {"username": "admin", "password": "wrong pass word xxxx"}}
    async with DashboardClient.from_credentials(wrong, **FAST_RETRIES) as dashboard:
        with pytest.raises(AuthenticationError):
            await dashboard.list_sites()
        with pytest.raises(AuthenticationError):
            await dashboard.list_abilities()
    async with DashboardClient.from_credentials(creds, key="disabled", **FAST_RETRIES) as dashboard:
        with pytest.raises(AuthenticationError):
            await dashboard.count_sites()
    async with DashboardClient.from_credentials(creds, key="read", **FAST_RETRIES) as dashboard:
        assert await dashboard.count_sites() > 0
        with pytest.raises(PermissionDenied):
            await dashboard.add_tag("read key cannot write")
    no_abilities = {k: v for k, v in creds.items() if k != "application_password"}
    async with DashboardClient.from_credentials(no_abilities, **FAST_RETRIES) as dashboard:
        with pytest.raises(ConfigurationError, match="FLEET_ABILITIES_USER"):
            await dashboard.list_updates()
    with pytest.raises(ConfigurationError, match="base_url"):
        DashboardClient.from_credentials({**creds, "base_url": "ftp://nowhere"})


def secrets_of(credentials: dict[str, Any]) -> list[str]:
    values = [*credentials["api_keys"].values(), credentials["application_password"]["password"],
              credentials["v1"]["consumer_key"], credentials["v1"]["consumer_secret"], credentials["admin_token"]]
    return [v for v in values if v]


async def test_no_secret_in_errors_reprs_or_logs(emulator: Any, truth: GroundTruth, faults: Any,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    secrets = secrets_of(emulator.credentials)
    seen: list[str] = []
    caplog.set_level(logging.DEBUG)
    async with DashboardClient.from_credentials(emulator.credentials, **FAST_RETRIES) as dashboard:
        seen += [repr(dashboard), str(dashboard.settings), repr(dashboard.settings), repr(dashboard._transport)]
        seen += [repr(await dashboard.all_sites()), repr(await dashboard.list_api_keys())]  # v1 keys in URLs
        faults({"error_rate": 0.5, "drop_rate": 0.3})
        calls = [dashboard.all_sites, dashboard.count_sites, lambda: dashboard.add_tag("secret probe"),
                 dashboard.list_ignored_updates, lambda: dashboard.get_site(424242)]
        for call in calls * 3:
            try:
                seen.append(repr(await call()))
            except DashboardError as exc:
                seen += [str(exc), repr(exc), str(exc.__cause__), str(exc.__context__)]
        faults("none")
        created = await dashboard.add_api_key(description="leak probe")
        seen += [repr(created), str(created), created.model_dump_json()]
        secrets.append(created.token.get_secret_value())
    bad = {**emulator.credentials, "api_keys": {"read_write": secrets[0][::-1]}}
    async with DashboardClient.from_credentials(bad, **{**FAST_RETRIES, "max_attempts": 1}) as dashboard:
        with pytest.raises(AuthenticationError) as caught:
            await dashboard.count_sites()
        seen += [str(caught.value), repr(caught.value)]
    seen += [record.getMessage() for record in caplog.records]
    seen += [caplog.text]
    text = "\n".join(seen)
    assert caplog.records, "expected the HTTP libraries to log the calls"
    leaked = [s[:6] + "..." for s in secrets if s in text]
    assert not leaked, f"secrets found in errors, reprs or logs: {leaked}"


async def test_unreachable_dashboard_is_a_transport_error() -> None:
    credentials = {"base_url": "http://127.0.0.1:9/wp-json", "namespace": "svc",
                   "api_keys": {"read_write": "a" * 40 + "==" + "b" * 40}}
    async with DashboardClient.from_credentials(credentials, **{**FAST_RETRIES, "max_attempts": 2}) as dashboard:
        with pytest.raises(TransportError) as caught:
            await dashboard.count_sites()
        with pytest.raises(TransportError):  # never sent: safe to retry even for a write, and not "unknown"
            await dashboard.add_tag("never sent")
    assert caught.value.path == "/wp-json/svc/v2/sites/count" and "a" * 40 not in str(caught.value)
