"""A 1,000-site fleet: every page read, and queued jobs that complete, stall, never start, time out or expire,
on the emulator's scalable clock (0.001: the dashboard's 60 s first run takes 60 ms)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from dashboard import DashboardClient
from dashboard.errors import JobExpired, JobNeverStarted, JobStalled, JobTimedOut
from dashboard.models import JobState
from tests.dashboard.conftest import start_server
from tests.dashboard.emulated import FAST_RETRIES, NAMESPACES, GroundTruth


@pytest.fixture(scope="module", params=NAMESPACES)
def fleet(request: pytest.FixtureRequest) -> Iterator[Any]:
    with start_server(namespace=request.param, sites=1000, seed=5, time_scale=0.001) as server:
        yield server


@pytest.fixture
async def big(fleet: Any) -> AsyncIterator[DashboardClient]:
    async with DashboardClient.from_credentials(fleet.credentials, **FAST_RETRIES) as dashboard:
        yield dashboard


@pytest.fixture
def fleet_truth(fleet: Any) -> Iterator[GroundTruth]:
    truth = GroundTruth(fleet)
    yield truth
    truth.faults("none")


async def test_every_page_of_1000_sites(big: DashboardClient, fleet_truth: GroundTruth) -> None:
    sites = await big.list_sites()
    ids = [s.id for s in sites]
    assert len(ids) == len(set(ids)) == 1000 == await big.count_sites()
    assert set(ids) == {int(i) for i in fleet_truth.state()["sites"]}
    updates = await big.list_updates()
    assert len(updates) > 200  # more than one page of list-updates-v1 (and far more than REST's 50)
    assert len({(u.site_id, u.type, u.slug) for u in updates}) == len(updates)
    some = ids[:250]  # more sites than one GET query carries: sent in groups
    assert await big.list_updates(include=some) == [u for u in updates if u.site_id in set(some)]


async def test_queued_job_over_the_threshold_completes(big: DashboardClient) -> None:
    start = await big.sync_sites(None)  # every site: above the 200-site threshold
    assert start.queued and start.sites == 1000
    updates: list[int] = []
    final = await big.wait_for_job(start.job_id, deadline=60, poll_interval=0.05,
                                   on_progress=lambda s: updates.append(s.processed))
    assert final.status is JobState.completed and final.processed == 1000
    assert updates == sorted(updates) and len(updates) >= 3  # queued, moving, done


async def test_job_whose_cron_never_fires(big: DashboardClient, fleet_truth: GroundTruth) -> None:
    fleet_truth.faults({"stuck_job_rate": 1.0})
    start = await big.check_sites(None)
    assert start.queued
    with pytest.raises(JobNeverStarted, match="WP-Cron") as caught:
        await big.wait_for_job(start.job_id, deadline=30, poll_interval=0.05, never_started_after=0.5)
    assert caught.value.last_status.status is JobState.queued
    with pytest.raises(JobTimedOut):
        await big.wait_for_job(start.job_id, deadline=0.3, poll_interval=0.05, never_started_after=10)


async def test_slowed_job_stalls(big: DashboardClient, fleet_truth: GroundTruth) -> None:
    fleet_truth.faults({"slow_job_rate": 1.0})
    start = await big.sync_sites(None)
    with pytest.raises(JobStalled) as caught:
        await big.wait_for_job(start.job_id, deadline=30, poll_interval=0.05, stall_after=1.0)
    assert not isinstance(caught.value, JobNeverStarted)
    assert caught.value.last_status.status is JobState.processing
    assert caught.value.last_status.processed < 1000


@pytest.fixture(scope="module")
def hurried() -> Iterator[Any]:
    """A clock so fast that the dashboard's 24-hour job retention passes in under 2 seconds."""
    with start_server(namespace="svc", sites=10, seed=3, time_scale=0.00002) as server:
        yield server


async def test_job_that_expires_while_waited_on(hurried: Any) -> None:
    truth = GroundTruth(hurried)
    truth.options(svc_abilities_batch_threshold=1)
    truth.faults({"stuck_job_rate": 1.0})
    try:
        async with DashboardClient.from_credentials(hurried.credentials, **FAST_RETRIES) as dashboard:
            start = await dashboard.sync_sites(None)
            assert start.queued
            with pytest.raises(JobExpired, match="disappeared"):
                await dashboard.wait_for_job(start.job_id, deadline=30, poll_interval=0.1, never_started_after=60)
    finally:
        truth.faults("none")
