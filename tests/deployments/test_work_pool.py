"""The night over several dashboards on a real work pool, set up with the README's commands: a Prefect server on a
socket, a process pool, two `prefect worker` processes, two emulated dashboards saved as blocks, and
`prefect deployment run` of maintain-dashboards (both answer), then of patch-dashboards with one dashboard down (a
vulnerability published since the night is patched by the other's security run, and the fan-out ends Failed naming
the one down: both fan-outs find a dashboard that does not answer with one `reached`). Two dashboards prove what
three did (a flow-run process each, their own blocks and write budgets, one down) with three processes fewer; the
down dashboard on the security fan-out rather than on a second night spares two more (a minute of the suite)."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shlex
import socket
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId, FlowRunFilterParentFlowRunId
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.settings import PREFECT_API_URL, temporary_settings

from cli.demo import feed_environment
from cli.estate_demo import FAN_OUT, POOL, LocalEstate
from deployments.work_pool import SECURITY_FAN_OUT_DEPLOYMENT
from emulator.testing import EmulatorServer
from fleet.engine.estate import NightStatus, find_run_dir, write_limit_name
from fleet.model.summary import Outcome, Summary
from tests.local_http import LOCAL_HTTP

README = Path(__file__).resolve().parents[2] / "README.md"


def documented_commands() -> list[list[str]]:
    """The commands of the README's "Scaling out with work pools" block, without comments, variables or exports."""
    section = README.read_text().split("### Scaling out with work pools", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the section shows its commands"
    commands = []
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            words.pop(0)
        if words and words[0] != "export":
            commands.append(words)
    return commands


def ran_as_documented(documented: list[str], ran: list[list[str]]) -> bool:
    """Some command ran with the documented program, sub-commands and names, and every documented option."""
    positional = list(itertools.takewhile(lambda word: not word.startswith("--"), documented))
    options = {w for w in documented if w.startswith("--")}
    for argv in ran:
        words = [Path(argv[0]).name, *argv[1:]]
        if words[: len(positional)] == positional and options <= set(words):
            return True
    return False


async def block_names(api_url: str, runs: list[FlowRun]) -> list[str]:
    """The saved Dashboard Connection each run was given (its `dashboard` parameter is a block reference)."""
    with temporary_settings({PREFECT_API_URL: api_url}):
        async with get_client() as client:
            return [(await client.read_block_document(run.parameters["dashboard"]["$ref"]["block_document_id"])).name
                    for run in runs]


async def state_message(api_url: str, flow_run_id: str) -> str:
    with temporary_settings({PREFECT_API_URL: api_url}):
        async with get_client() as client:
            run = await client.read_flow_run(flow_run_id)
            return (run.state.message if run.state else None) or ""


async def runs_of(api_url: str, deployment: str) -> list[FlowRun]:
    with temporary_settings({PREFECT_API_URL: api_url}):
        async with get_client() as client:
            found = await client.read_deployment_by_name(deployment)
            return await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(deployment_id=FlowRunFilterDeploymentId(any_=[found.id])))


async def children(api_url: str, parent: str) -> list[FlowRun]:
    with temporary_settings({PREFECT_API_URL: api_url}):
        async with get_client() as client:
            return await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent]))
            )


def run_by_a_worker(flow_run: FlowRun, logs: Path) -> bool:
    """A worker's log says it submitted this run (and did not abort it: the other worker took it)."""
    for log in logs.glob("worker-*.log"):
        text = log.read_text(errors="replace")
        if f"submitting flow run '{flow_run.id}'" in text and f"Aborted submission of flow run '{flow_run.id}'" not in (
            text
        ):
            return True
    return False


def admin(board: EmulatorServer, method: str, path: str, body: dict[str, object] | None = None) -> dict:
    answer = LOCAL_HTTP.request(method, f"{board.root_url}/__emulator__/{path}", json=body,
                                headers={"x-emulator-token": board.config.admin_token.get_secret_value()})
    answer.raise_for_status()
    return answer.json()


def offer_a_vulnerability_fix(board: EmulatorServer) -> tuple[int, str, str]:
    """A site whose plugins are all up to date is offered a new release of one (its dashboard syncs it, as an
    operator's click would), and a vulnerability is published for the release it runs, fixed in the new one."""
    truth = admin(board, "GET", "state")
    site = next(site for _, site in sorted(truth["sites"].items(), key=lambda pair: int(pair[0]))
                if site["status"] == "connected" and site["plugins"] and not site["pending_updates"])
    slug, plugin = sorted(site["plugins"].items())[0]
    fixed = f"{plugin['version']}.1"
    admin(board, "POST", "offers", {"site_id": site["id"], "type": "plugin", "slug": slug, "version": fixed})
    credentials = board.credentials
    LOCAL_HTTP.post(f"{credentials['base_url']}/{credentials['namespace']}/v2/sites/{site['id']}/sync", timeout=60,
                    headers={"Authorization": f"Bearer {credentials['api_keys']['read_write']}"}).raise_for_status()
    admin(board, "POST", "vulnerabilities/publish",
          {"type": "plugin", "slug": slug, "to_version": plugin["version"], "patched": [fixed]})
    return site["id"], slug, fixed


@pytest.mark.long(180)
@pytest.mark.timeout(900)  # a server, two workers, eight flow-run processes: minutes on a busy machine
def test_dashboards_on_a_process_pool(tmp_path: Path) -> None:
    with LocalEstate(tmp_path, dashboards=2, workers=2, sites=6, time_scale=0.001) as estate:
        for documented in documented_commands():
            if documented[:2] != ["prefect", "deployment"]:
                assert ran_as_documented(documented, estate.commands), f"not run as the README says: {documented}"
        first = estate.run_night()

        assert first.state == "COMPLETED", (
            [(n.block, n.status.value, n.message) for n in first.estate.nights], first.output)
        assert ran_as_documented(documented_commands()[-1], estate.commands)
        assert [str(run.id) for run in asyncio.run(runs_of(estate.api_url, FAN_OUT))] == [first.flow_run_id], (
            "one `prefect deployment run`, one fan-out")
        assert [(n.block, n.status) for n in first.estate.nights] == [
            (f"dashboard-{i}", NightStatus.completed) for i in (1, 2)
        ]
        runs = asyncio.run(children(estate.api_url, first.flow_run_id))
        assert len(runs) == 2 and {str(run.id) for run in runs} == {n.flow_run_id for n in first.estate.nights}
        names = asyncio.run(block_names(estate.api_url, runs))
        assert sorted(names) == sorted(estate.emulators)
        for run, name in zip(runs, names, strict=True):
            assert run.state and run.state.type is StateType.COMPLETED
            assert run.work_pool_name == POOL
            limit = (run.job_variables or {})["env"]["FLEET_CONCURRENCY_LIMIT"]
            assert limit == write_limit_name(name), "its own write budget"
            pid = int(str(run.infrastructure_pid).rsplit(":", 1)[-1])
            assert pid != os.getpid(), "run in a process of its own, not in the test's"
            assert run_by_a_worker(run, estate.logs), f"no worker ran {run.name}"
        sizes = {n.block: n.tally.sites for n in first.estate.nights if n.tally}
        assert sizes == {"dashboard-1": 6, "dashboard-2": 10}, "two different fleets"
        assert all(n.tally and n.tally.updated > 0 for n in first.estate.nights)

        html = first.report.read_text()
        assert html.index('id="estate"') < html.index('id="dashboard-1"') < html.index('id="dashboard-2"')
        links = re.findall(r'<a href="([^"#][^"]*)">This dashboard', html)
        assert len(links) == 2 and all((first.directory / link).is_file() for link in links)
        assert (first.directory / "estate.eml").is_file(), "delivered like the other reports (no SMTP: .eml)"

        # between nights, the security fan-out with dashboard-2 down: a vulnerability published for the release one
        # site of dashboard-1 runs, fixed in a release offered to it since, is patched by that dashboard's run on the
        # pool; dashboard-2 does not answer, gets no run, and the fan-out ends Failed naming it
        board = estate.emulators["dashboard-1"]
        site_id, slug, fixed = offer_a_vulnerability_fix(board)
        feeds = {"dashboard-1": {**feed_environment(board.credentials), "FLEET_VULN_REFRESH": "0",
                                 "FLEET_PROBE_URL_TEMPLATE": board.credentials["site_url_template"]}}
        stopped = estate.emulators["dashboard-2"]
        stopped.stop()
        with socket.socket() as held:  # its port stays closed: no server of a test beside this one answers there
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past its connections' TIME_WAIT
            held.bind((stopped.host, stopped.port))
            patch_run, state, _ = estate.run_deployment(SECURITY_FAN_OUT_DEPLOYMENT, {"environment": feeds})

        assert state == "FAILED", "the fan-out ends Failed, naming the dashboard"
        message = asyncio.run(state_message(estate.api_url, patch_run))
        assert "dashboard-2: unreachable" in message and "dashboard-1" not in message, message
        runs = asyncio.run(children(estate.api_url, patch_run))
        assert asyncio.run(block_names(estate.api_url, runs)) == ["dashboard-1"]
        assert all(run.state and run.state.type is StateType.COMPLETED and run.work_pool_name == POOL
                   for run in runs)
        assert admin(board, "GET", "state")["sites"][str(site_id)]["plugins"][slug]["version"] == fixed
        [security_run] = runs
        summary = Summary.read(find_run_dir(estate.report_dir / "dashboard-1", str(security_run.id)))
        assert {(item.site_id, item.slug, item.outcome) for item in summary.items} == {
            (site_id, slug, Outcome.updated)}, "the fix only"
