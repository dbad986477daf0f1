"""Replay every captured Abilities exchange (`ab-*`) against a fresh `mainwp` emulator set up like the lab and
compare status, shape (keys and JSON types at every level; values may differ) and the `Allow` header.

The lab lowered the batch threshold and the chunk size to 1 for its queued captures; so does the replay. The
job-status captures are replayed against a job this emulator queued the same way, after as many cron runs as
the captured phase had seen (0 queued, 1 processing, 2 completed)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import httpx

from emulator.config import EmulatorConfig
from tests.emulator.abilities_harness import ROOT_URL, Dashboard, dashboard, run
from tests.emulator.test_replay import answer_problems, lab_request, lab_setup, report
from tests.reference import EXCHANGES, require_reference

STATUS = re.compile(r"^ab-run-get-batch-job-status-v1-(?P<job>.+)-(?P<phase>queued|processing-1of2|completed)$")
PHASE_RUNS = {"queued": 0, "processing-1of2": 1, "completed": 2}
# The capture that queued each job the status captures follow (abilities, or the REST v2 routes).
JOB_SOURCES = {
    "sync-sites-v1": "ab-run-sync-sites-v1-queued",
    "sync-sites-v1-unknown": "ab-run-sync-sites-v1-queued-with-unknown-site",
    "check-sites-v1": "ab-run-check-sites-v1-queued",
    "check-sites-v1-unknown": "ab-run-check-sites-v1-queued-with-unknown-site",
    "run-updates-v1": "ab-run-run-updates-v1-queued",
    "update-all-v1": "ab-run-update-all-v1-queued",
    "v2-sites-sync": "v2-sites-sync-all-queued",
    "v2-updates-update": "v2-updates-update-all-sites-queued",
    "v2-updates-update-again": "v2-updates-update-all-sites-queued-again",
}


def lab_config(name: str) -> EmulatorConfig:
    return EmulatorConfig(namespace="mainwp", sites=2, seed=7, time_scale=1e-6,
                          abilities_accept_bearer=name != "ab-auth-mainwp-bearer")


async def send(board: Dashboard, exchange: dict[str, Any], job_id: str | None = None) -> httpx.Response:
    method, path, headers, content = lab_request(board, exchange["request"])
    if "wrong application password" in (exchange["request"].get("auth") or ""):
        user = board.credentials["application_password"]["username"]
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:wrong pass word".encode()).decode()
    if job_id is not None:
        path = re.sub(r"(sync|update|check|reconnect|disconnect|suspend)_[0-9a-f-]{36}", job_id, path)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=board.app), base_url=ROOT_URL + "/wp-json") as c:
        return await c.request(method, path, headers=headers, content=content)


async def queue_job(board: Dashboard, job: str) -> str:
    response = await send(board, json.loads((EXCHANGES / f"{JOB_SOURCES[job]}.json").read_text()))
    assert response.status_code == 200, response.text
    return response.json()["job_id"]


async def replay_one(path: Path) -> list[str]:
    """Problems of one exchange (empty when status and shape match)."""
    name = path.stem
    exchange = json.loads(path.read_text())
    async with dashboard(lab_config(name), lifespan=False) as board:
        lab_setup(board, name)
        status_phase = STATUS.match(name)
        if "queued" in name or status_phase:
            board.set_option("abilities_batch_threshold", 1)
            board.set_option("abilities_cron_chunk_size", 1)
        if name == "ab-run-update-site-themes-v1-all-success":  # the lab's site 2 answered at 127.0.0.1:8082
            async with board.client() as client:
                moved = await run(client, "mainwp/update-site-v1",
                                  {"site_id_or_domain": 2, "url": "http://127.0.0.1:8082/"})
            assert moved.status_code == 200, moved.text
        job_id = None
        if status_phase:
            job_id = await queue_job(board, status_phase["job"])
            for _ in range(PHASE_RUNS[status_phase["phase"]]):
                await board.jobs.run_once(job_id)
        response = await send(board, exchange, job_id)
    return answer_problems(exchange["response"], response, headers=("Allow",))


async def test_replay_abilities_exchanges() -> None:
    require_reference()
    files = sorted(EXCHANGES.glob("ab-*.json"))
    assert len(files) == 113
    report("abilities exchanges", {path.stem: await replay_one(path) for path in files}, skipped=[])
