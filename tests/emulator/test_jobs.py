"""Background batch jobs end to end over HTTP, on a clock scaled to 0.001 (60 s -> 60 ms, 30 s -> 30 ms)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from emulator.config import EmulatorConfig
from emulator.jobs import CHUNK_INTERVAL, EXPIRY, FIRST_RUN_DELAY, TIMEOUT, child_outdated
from emulator.testing import free_port
from tests.emulator.abilities_harness import Dashboard, build_app, dashboard, run

CONFIG = EmulatorConfig(namespace="svc", sites=450, seed=3, time_scale=0.001, gateway_timeout=0)
STATUS = "svc/get-batch-job-status-v1"


async def job_status(client: httpx.AsyncClient, job_id: str) -> httpx.Response:
    return await run(client, STATUS, {"job_id": job_id})


async def follow(client: httpx.AsyncClient, job_id: str, until: tuple[str, ...] = ("completed", "failed"),
                 timeout: float = 10.0) -> list[dict[str, Any]]:
    """Every distinct status answer until the job reaches one of `until`."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = await job_status(client, job_id)
        assert response.status_code == 200, response.text
        body = response.json()
        if not seen or body != seen[-1]:
            seen.append(body)
        if body["status"] in until:
            return seen
        await asyncio.sleep(0.002)
    raise AssertionError(f"job {job_id} did not reach {until}: last {seen[-1]}")


def is_job_id(value: str, prefix: str) -> bool:
    match = re.fullmatch(rf"{prefix}_([0-9a-f-]{{36}})", value)
    return bool(match) and uuid.UUID(match.group(1)).version == 4


@pytest.fixture
async def board():
    async with dashboard(CONFIG) as board:
        yield board


async def test_threshold_200_runs_at_once_201_and_450_queue(board: Dashboard) -> None:
    ids = sorted(board.emulator.state.sites)
    async with board.client() as client:
        exactly = (await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": ids[:200]})).json()
        above = (await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": ids[:201]})).json()
        everything = (await run(client, "svc/sync-sites-v1", {})).json()
    assert exactly["queued"] is False and exactly["total_synced"] + exactly["total_errors"] == 200
    for answer, count in ((above, 201), (everything, 450)):
        assert set(answer) == {"queued", "job_id", "status_url", "sites_queued"}
        assert answer["queued"] is True and answer["sites_queued"] == count
        assert is_job_id(answer["job_id"], "sync")
        assert answer["status_url"] == f"http://emulator.test/wp-json/svc/v2/jobs/{answer['job_id']}"


async def test_threshold_is_a_dashboard_setting(board: Dashboard) -> None:
    board.set_option("abilities_batch_threshold", 3)
    async with board.client() as client:
        at = (await run(client, "svc/check-sites-v1", {"site_ids_or_domains": [1, 2, 3]})).json()
        above = (await run(client, "svc/check-sites-v1", {"site_ids_or_domains": [1, 2, 3, 4, "x.example"]})).json()
    assert at["queued"] is False and at["total_checked"] == 3
    assert set(above) == {"queued", "job_id", "total", "errors"}  # no status_url, as the real answer
    assert above["total"] == 4 and above["errors"][0]["identifier"] == "x.example"


@pytest.mark.parametrize(("name", "prefix", "keys"), [
    ("svc/run-updates-v1", "update", {"queued", "job_id", "status_url", "updates_queued", "errors"}),
    ("svc/update-all-v1", "update", {"queued", "job_id", "status_url", "updates_queued", "errors"}),
    ("svc/reconnect-sites-v1", "reconnect", {"queued", "job_id", "total", "errors"}),
    ("svc/disconnect-sites-v1", "disconnect", {"queued", "job_id", "total", "errors"}),
    ("svc/check-sites-v1", "check", {"queued", "job_id", "total", "errors"}),
    ("svc/suspend-sites-v1", "suspend", {"queued", "job_id", "total", "errors"}),
    ("svc/sync-sites-v1", "sync", {"queued", "job_id", "status_url", "sites_queued"}),
])
async def test_every_batch_ability_queues_above_the_threshold(name, prefix, keys) -> None:
    # the job's status is read while it waits for its first run: 3 s of wall time here (60 ms at CONFIG's scale,
    # which a test beside a second suite once took between queueing and reading, and found it processing)
    async with dashboard(CONFIG.model_copy(update={"time_scale": 0.05})) as board, board.client() as client:
        answer = (await run(client, name, {"site_ids_or_domains": list(range(1, 202)) + ["nope.example"]})).json()
        first = (await job_status(client, answer["job_id"])).json()
    assert set(answer) == keys and is_job_id(answer["job_id"], prefix)
    if "updates_queued" in answer:
        assert answer["updates_queued"] == 201  # counts sites
        assert answer["errors"][0]["code"] == "svc_site_not_found" and answer["errors"][0]["site_id"] == 0
    assert first == {"job_id": answer["job_id"], "type": prefix, "status": "queued", "progress": 0, "processed": 0,
                     "total": 201, "succeeded": 0, "failed": 0, "started_at": None, "completed_at": None,
                     "errors": [], "job_timed_out": False}


async def test_a_450_site_job_runs_in_chunks_of_20_and_completes(board: Dashboard) -> None:
    outdated = sum(1 for s in board.emulator.state.sites.values() if child_outdated(s))  # the job's failures add some
    async with board.client() as client:
        board.emulator.jobs.hold(True)  # WP-Cron held while the first status is read: 60 ms at this scale otherwise
        queued_at = time.monotonic()
        job_id = (await run(client, "svc/sync-sites-v1", {})).json()["job_id"]
        seen = [(await job_status(client, job_id)).json()]
        board.emulator.jobs.hold(False)
        seen += await follow(client, job_id)
    first_processing = next(i for i, s in enumerate(seen) if s["status"] == "processing")
    assert time.monotonic() - queued_at >= board.emulator.clock.scaled(FIRST_RUN_DELAY)
    statuses = [s["status"] for s in seen]
    assert statuses[0] == "queued" and statuses[-1] == "completed"
    assert statuses == sorted(statuses, key=["queued", "processing", "completed"].index)
    for answer in seen[first_processing:]:
        assert answer["processed"] % 20 == 0 or answer["processed"] == 450
        assert answer["progress"] == round(answer["processed"] / 450 * 100)
        assert answer["succeeded"] + answer["failed"] == answer["processed"]
        assert answer["started_at"] is not None
    done = seen[-1]
    assert done["progress"] == 100 and done["processed"] == done["total"] == 450
    assert done["completed_at"] is not None and done["job_timed_out"] is False
    # six generated sites are unreachable: their syncs fail per site and the job still completes
    unreachable = {s.id for s in board.emulator.state.sites.values() if not s.reachable}
    assert unreachable and {e["site_id"] for e in done["errors"]} >= unreachable
    assert {e["code"] for e in done["errors"]} <= {"sync_failed", "site_offline"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", done["completed_at"])
    chunks = (450 + 19) // 20
    known_offline = sum(1 for s in board.emulator.state.sites.values() if s.offline_check_result == -1)
    assert known_offline  # refused before any call to the child, as the real dashboard does
    assert board.emulator.capacity.operations["sync"] == 450 - outdated - known_offline
    assert len({s["processed"] for s in seen[first_processing:]}) <= chunks


async def test_update_job_ignores_ignore_lists_and_completes_with_per_site_errors(board: Dashboard) -> None:
    state, ops = board.emulator.state, board.emulator.operations
    healthy = [s for s in state.sites.values()
               if s.reachable and not s.suspended and s.child_connected and not s.child_version.startswith("3.")]
    with_plugins = [s for s in healthy if any(u.type == "plugin" for u in state.pending_updates(s))]
    failing, ignoring = with_plugins[0], with_plugins[1]
    bad_slug = next(u.slug for u in state.pending_updates(failing) if u.type == "plugin")
    ops.set_item_fault(failing, "plugin", bad_slug, "fail")
    ignored_slug = next(u.slug for u in state.pending_updates(ignoring) if u.type == "plugin")
    state.ignore_items(ignoring, "plugin", [ignored_slug])
    offered = ignoring.plugins[ignored_slug].offer
    async with board.client() as client:
        answer = (await run(client, "svc/update-all-v1", {"types": ["plugins"]})).json()
        done = (await follow(client, answer["job_id"]))[-1]
    assert answer["updates_queued"] == 450
    assert done["status"] == "completed" and done["processed"] == 450
    errors = {e["site_id"]: e for e in done["errors"]}
    assert errors[failing.id]["code"] == "update_failed"
    assert errors[failing.id]["message"] == f"plugins: {bad_slug}: Download failed."
    assert done["failed"] == len(done["errors"]) and done["succeeded"] == 450 - done["failed"]
    assert ignoring.plugins[ignored_slug].version == offered  # the real job re-applies no ignore list


def profile_file(tmp_path: Path, **rates: float) -> str:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"extends": "none", **rates}))
    return str(path)


async def test_a_slowed_job_fails_at_the_4_hour_timeout(tmp_path: Path) -> None:
    config = CONFIG.model_copy(update={"faults": profile_file(tmp_path, slow_job_rate=1.0)})
    async with dashboard(config) as board, board.client() as client:
        job_id = (await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": list(range(1, 202))})).json()["job_id"]
        await follow(client, job_id, until=("processing",))
        await asyncio.sleep(board.emulator.clock.scaled(2 * CHUNK_INTERVAL))
        assert (await job_status(client, job_id)).json()["processed"] == 1  # one site per run, 90 min apart
        board.emulator.clock.advance(TIMEOUT)
        done = (await follow(client, job_id))[-1]
    assert done["status"] == "failed" and done["job_timed_out"] is True
    assert done["job_error_code"] == "timeout"
    assert done["job_error_message"] == "Job timed out after 4 hours. Partial results may be available."
    assert done["errors"][-1] == {"site_id": 0, "code": "timeout", "message": "Job timed out after 4 hours."}
    assert done["processed"] < done["total"] and done["completed_at"] is not None


async def test_a_job_whose_cron_never_fires_stays_queued_then_expires(tmp_path: Path) -> None:
    config = CONFIG.model_copy(update={"faults": profile_file(tmp_path, stuck_job_rate=1.0)})
    async with dashboard(config) as board, board.client() as client:
        job_id = (await run(client, "svc/sync-sites-v1", {})).json()["job_id"]
        await asyncio.sleep(board.emulator.clock.scaled(3 * FIRST_RUN_DELAY))
        assert (await job_status(client, job_id)).json()["status"] == "queued"
        board.emulator.clock.advance(EXPIRY + 1)
        gone = await job_status(client, job_id)
    assert gone.status_code == 404 and gone.json()["code"] == "svc_job_not_found"


async def test_a_job_expires_24_hours_after_its_last_write(board: Dashboard) -> None:
    board.set_option("abilities_batch_threshold", 5)
    async with board.client() as client:
        job_id = (await run(client, "svc/check-sites-v1", {"site_ids_or_domains": list(range(1, 10))})).json()["job_id"]
        await follow(client, job_id)
        board.emulator.clock.advance(EXPIRY - 3600)
        kept = await job_status(client, job_id)
        board.emulator.clock.advance(2 * 3600)
        gone = await job_status(client, job_id)
    assert kept.status_code == 200 and kept.json()["status"] == "completed"
    assert gone.status_code == 404
    assert gone.json() == {"code": "svc_job_not_found",
                           "message": "Batch job not found. Job may have expired (jobs are kept for 24 hours).",
                           "data": {"status": 404}}
    assert job_id not in board.emulator.state.jobs


async def test_identical_jobs_are_not_guarded(board: Dashboard) -> None:
    async with board.client() as client:
        first = (await run(client, "svc/update-all-v1", {"types": ["translations"]})).json()
        second = (await run(client, "svc/update-all-v1", {"types": ["translations"]})).json()
        finals = [(await follow(client, j))[-1] for j in (first["job_id"], second["job_id"])]
    assert first["job_id"] != second["job_id"]
    assert [f["status"] for f in finals] == ["completed", "completed"]


async def test_jobs_queued_side_by_side_share_one_cron_run_at_a_time(board: Dashboard, monkeypatch) -> None:
    """wp-cron.php runs under a lock: the due events' chunks go one after another, never on a worker each."""
    jobs = board.emulator.jobs
    working = {"now": 0, "most": 0}
    original = type(jobs)._work_site

    async def counted(self, job, site_id):
        working["now"] += 1
        working["most"] = max(working["most"], working["now"])
        try:
            return await original(self, job, site_id)
        finally:
            working["now"] -= 1

    monkeypatch.setattr(type(jobs), "_work_site", counted)
    async with board.client() as client:
        queued = [(await run(client, "svc/sync-sites-v1", {})).json()["job_id"] for _ in range(3)]
        finals = [(await follow(client, job_id, timeout=30))[-1] for job_id in queued]
    assert [final["status"] for final in finals] == ["completed"] * 3
    assert working["most"] == 1, "two jobs' sites were worked at once"


async def test_a_restarted_emulator_finishes_the_job(tmp_path: Path) -> None:
    config = CONFIG.model_copy(update={"db": tmp_path / "dashboard.sqlite"})
    async with dashboard(config) as board, board.client() as client:
        job_id = (await run(client, "svc/sync-sites-v1", {})).json()["job_id"]
        seen = await follow(client, job_id, until=("processing",))
        while seen[-1]["processed"] < 60:
            seen = await follow(client, job_id, until=("processing",))
            await asyncio.sleep(0.005)
        interrupted = seen[-1]
    assert interrupted["status"] == "processing" and 0 < interrupted["processed"] < 450
    async with dashboard(config) as board, board.client() as client:
        done = (await follow(client, job_id))[-1]
        stored = board.emulator.state.jobs[job_id]
    assert done["status"] == "completed" and done["processed"] == 450
    assert done["started_at"] == interrupted["started_at"]
    handled = stored["succeeded"] + [e["site_id"] for e in stored["errors"]]
    assert sorted(handled) == sorted(set(handled)) and len(handled) == 450


async def test_capacity_bounds_concurrency_and_keeps_a_ledger() -> None:
    config = EmulatorConfig(namespace="svc", sites=12, seed=3, time_scale=0.001, workers=2,
                            work_seconds={"sync": 10.0}, gateway_timeout=0, slow_site_rate=0)
    async with dashboard(config) as board, board.client() as client:
        started = time.monotonic()
        answer = (await run(client, "svc/sync-sites-v1", {"site_ids_or_domains": list(range(1, 13))})).json()
        elapsed = time.monotonic() - started
    capacity = board.emulator.capacity
    assert answer["queued"] is False
    attempted = capacity.operations["sync"]
    assert attempted == answer["total_synced"] + sum(1 for e in answer["errors"]
                                                     if e["code"] == "svc_sync_failed")
    # one request on one worker: its bootstrap, then its sites one after another
    assert capacity.modelled_seconds == pytest.approx(10.0 * attempted + capacity.work_seconds["bootstrap"])
    # two workers: the work cannot finish faster than total work / workers (a physical bound, not a speed target)
    assert elapsed >= capacity.lower_bound_seconds() * 0.95


def test_a_job_runs_to_completion_behind_a_real_socket() -> None:
    """uvicorn with the app's lifespan: the runner starts with the server and the job completes over HTTP."""
    app = build_app(CONFIG)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    app_password = app.state.emulator.credentials("")["application_password"]
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/wp-json/wp-abilities/v1",
                          auth=(app_password["username"], app_password["password"]), timeout=10) as client:
            job_id = client.post("/abilities/svc/sync-sites-v1/run", json={"input": {}}).json()["job_id"]
            status: dict[str, Any] = {}
            while time.monotonic() < deadline + 10 and status.get("status") != "completed":
                status = client.get("/abilities/svc/get-batch-job-status-v1/run",
                                    params={"input[job_id]": job_id}).json()
                time.sleep(0.02)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        app.state.emulator.state.close()
    assert status["status"] == "completed" and status["processed"] == 450
