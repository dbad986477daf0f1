"""Every deployment's "Custom run" form in the Prefect UI, submitted in a real browser as a person would.

The UI checks each value against the deployment's parameter schema before it sends anything ("Validate
parameters", on by default): a schema that leaves `null` out while the default is `None` blocks the form as it
opens. So this drives the UI itself (Playwright and the system Chromium) against `prefect server start` with the
deployments registered, and reads the created flow runs back through Prefect's API. Skipped, saying why, where no
Chromium is installed (`apt-get install chromium`; CI installs it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cli.local_prefect import LocalPrefectServer
from tests.local_http import LOCAL_HTTP

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DEPLOYMENTS = ["nightly-maintenance/nightly", "update-fleet/update_fleet", "sync-fleet/sync_fleet",
               "check-fleet/check_fleet", "report/report", "nightly-maintenance/dashboard-night",
               "maintain-dashboards/maintain-dashboards", "patch-dashboards/patch-dashboards"]
REQUIRED = {"report/report": {"run_dir": "reports/20261124-020000-abcdef12"}}  # the only field without a default
# How long the UI may take to open a form or leave it after Submit: a busy machine's browser and server are slow,
# and a form the UI refuses is told by its field errors, not by the wait (20 s failed beside other suites)
UI_WAIT_MS = 120_000
TOASTS = "#prefect-design-toast-app"

pytestmark = [pytest.mark.long(15), pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium): the Prefect UI's run forms "
    "are not submitted in a browser here")]

REGISTER = """
import asyncio, json
from pathlib import Path
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from dashboard.block import DashboardConnection
from deployments.serve import ScheduleSettings, build_deployments
from deployments.work_pool import deploy_to_pool

async def main():
    ids = {}
    for deployment in await build_deployments(ScheduleSettings()):
        ids[f"{deployment.flow_name}/{deployment.name}"] = str(await deployment.aapply())
    async with get_client() as client:
        await client.create_work_pool(WorkPoolCreate(name="forms", type="process"), overwrite=True)
        for deployment_id in await deploy_to_pool(Path.cwd(), "forms"):
            deployment = await client.read_deployment(deployment_id)
            flow = await client.read_flow(deployment.flow_id)
            ids[f"{flow.name}/{deployment.name}"] = str(deployment_id)
    block = await DashboardConnection(base_url="https://dash.example.com/wp-json", namespace="mainwp",
                                      api_key="secret==key").asave("production", overwrite=True)
    print("REGISTERED " + json.dumps({"deployments": ids, "block": str(block)}))

asyncio.run(main())
"""


@dataclass(frozen=True)
class PrefectUI:
    url: str
    deployments: dict[str, str]  # "flow/deployment" -> id
    block_id: str

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        answer = LOCAL_HTTP.request(method, f"{self.url}/api{path}", **kwargs)
        answer.raise_for_status()
        return answer.json()


@pytest.fixture(scope="module")
def prefect_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectUI]:
    """`prefect server start` on a free port with a home of its own, the deployments and one saved block."""
    with LocalPrefectServer(tmp_path_factory.mktemp("prefect-ui")) as server:
        registered = subprocess.run([sys.executable, "-c", REGISTER], cwd=ROOT, capture_output=True, text=True,
                                    env=server.environment(), timeout=300)
        line = next((line for line in registered.stdout.splitlines() if line.startswith("REGISTERED ")), None)
        assert line, f"registering the deployments failed:\n{registered.stdout[-2000:]}\n{registered.stderr[-3000:]}"
        answer = json.loads(line.removeprefix("REGISTERED "))
        yield PrefectUI(server.url, answer["deployments"], answer["block"])


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        await chromium.close()


async def open_run_form(browser: Any, prefect_ui: PrefectUI, deployment: str) -> Any:
    page = await browser.new_page(viewport={"width": 1400, "height": 2000})
    await page.goto(f"{prefect_ui.url}/deployments/deployment/{prefect_ui.deployments[deployment]}/run")
    await page.get_by_role("button", name="Submit").wait_for(timeout=UI_WAIT_MS)
    # the UI's toasts lie over the Submit button until they fade: under a loaded suite one took every click for 30 s
    # (a person waits or closes it); they let clicks through here, and what they say is kept for a failure's message.
    # The rule is on every element of the toasts' tree: each toast sets its own pointer-events, which the app's
    # root alone does not override (CI lost 90 s and the test to a toast's inner <div> so)
    await page.add_style_tag(content=f"{TOASTS}, {TOASTS} * {{ pointer-events: none !important; }}")
    return page


async def lay_a_toast_over_the_page(page: Any) -> None:
    """CI lost a form test to a toast's own element lying over Submit for 30 s: one is put there, as the UI's toasts
    are (an element inside the toast app that takes pointer events); the form must still submit."""
    await page.evaluate(f"""() => {{
        const toast = document.createElement("div");
        toast.style.cssText = "position: fixed; inset: 0; z-index: 99999; pointer-events: auto";
        toast.textContent = "a toast over the whole page";
        document.querySelector("{TOASTS}").appendChild(toast);
    }}""")


async def submit(page: Any, prefect_ui: PrefectUI, deployment: str, before: int) -> None:
    """Submit the form; a form the UI refuses stays on its page with its fields' errors, which are named. A click
    a busy browser lost (the page still on the form, no run created: seen once in a loaded full suite, 120 s
    without leaving) is clicked again; a run created means it was submitted, however slowly the page leaves."""
    for _ in range(3):
        await page.get_by_role("button", name="Submit").click()
        try:
            await page.wait_for_url(lambda url: not url.rstrip("/").endswith("/run"), timeout=UI_WAIT_MS / 3)
            return
        except Exception:
            if len(runs_of(prefect_ui, deployment)) > before:
                return
    text = await page.locator("form").inner_text()
    problems = [line for line in text.splitlines() if "valid" in line or "not of type" in line]
    toasts = await page.locator(TOASTS).all_inner_texts()
    pytest.fail(f"the {deployment} form was not submitted as it opened: {problems or text[-1500:]}; the UI said: "
                f"{toasts}")


def runs_of(prefect_ui: PrefectUI, deployment: str) -> list[dict[str, Any]]:
    """The deployment's flow runs a person started, the newest first: the server's scheduler adds the nightly
    schedule's runs beside them at any moment."""
    runs = prefect_ui.api("POST", "/flow_runs/filter", json={
        "deployments": {"id": {"any_": [prefect_ui.deployments[deployment]]}}})
    return sorted((run for run in runs if not run["auto_scheduled"]), key=lambda run: run["created"], reverse=True)


async def submit_and_read(page: Any, prefect_ui: PrefectUI, deployment: str) -> dict[str, Any]:
    """The flow run the form's submission created."""
    before = len(runs_of(prefect_ui, deployment))
    await submit(page, prefect_ui, deployment, before)
    await page.close()
    runs = runs_of(prefect_ui, deployment)
    assert len(runs) == before + 1, f"{deployment}: the form was submitted but no flow run was created"
    return runs[0]


def form_defaults(prefect_ui: PrefectUI, deployment: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A deployment's parameter schema, and the values its run form opens with (its defaults, the required ones
    filled)."""
    schema = prefect_ui.api("GET", f"/deployments/{prefect_ui.deployments[deployment]}")["parameter_openapi_schema"]
    values = {name: field["default"] for name, field in schema["properties"].items() if "default" in field}
    return schema, values | REQUIRED.get(deployment, {})


@pytest.mark.parametrize("deployment", DEPLOYMENTS)
def test_every_run_form_validates_as_it_opens_where_the_ui_validates_it(prefect_ui: PrefectUI, deployment: str) -> None:
    """Every deployment's form, checked by the server's own endpoint the UI asks before it sends a run
    (`POST /ui/schemas/validate`); a schema that leaves `null` out of a field whose default is None is refused there
    (the fault the browser tests below found first). Three forms also go through the browser."""
    schema, values = form_defaults(prefect_ui, deployment)
    answer = prefect_ui.api("POST", "/ui/schemas/validate", json={"schema": schema, "values": values})
    assert answer["valid"], (deployment, answer["errors"])
    nullable = next(name for name, value in values.items() if value is None)
    strict = json.loads(json.dumps(schema))
    field = strict["properties"][nullable]
    field["anyOf"] = [option for option in field.get("anyOf", [field]) if option.get("type") != "null"]
    refused = prefect_ui.api("POST", "/ui/schemas/validate", json={"schema": strict, "values": values})
    assert not refused["valid"], f"{deployment}: {nullable} without null was not refused"


# the browser opens three forms (the nightly, one with a required field, a fan-out's): each costs the suite 6 to 8 s
# of a loaded machine; every form is validated where the UI validates it above
@pytest.mark.parametrize("deployment", ["nightly-maintenance/nightly", "report/report",
                                        "maintain-dashboards/maintain-dashboards"])
async def test_each_custom_run_form_submits_as_it_opens(prefect_ui: PrefectUI, browser: Any, deployment: str) -> None:
    """Each with a toast over it (a page load of the UI costs seconds of CPU: no form opens for the toast alone)."""
    page = await open_run_form(browser, prefect_ui, deployment)
    await lay_a_toast_over_the_page(page)
    required = REQUIRED.get(deployment, {})
    for name, value in required.items():
        field = page.locator(".schema-form-property").filter(has_text=name).first
        await field.locator("input, textarea").first.fill(value)
    run = await submit_and_read(page, prefect_ui, deployment)
    schema = prefect_ui.api("GET", f"/deployments/{prefect_ui.deployments[deployment]}")["parameter_openapi_schema"]
    assert set(schema.get("required", [])) == set(required), deployment
    defaults = {name: field["default"] for name, field in schema["properties"].items() if "default" in field}
    assert defaults, deployment
    sent = {name: run["parameters"].get(name) for name in defaults}
    assert sent == defaults, f"{deployment}: the run's parameters are not the form's defaults"
    assert {name: run["parameters"].get(name) for name in required} == required
    assert set(run["parameters"]) <= set(schema["properties"])


async def test_a_picked_dashboard_block_reaches_the_run(prefect_ui: PrefectUI, browser: Any) -> None:
    """The nightly form, whose other pickers (the e-mail block, the date) must not block it once one is chosen."""
    deployment = "nightly-maintenance/nightly"
    page = await open_run_form(browser, prefect_ui, deployment)
    field = page.locator(".schema-form-property").filter(has_text="dashboard (Optional)").first
    await field.get_by_role("button", name="DashboardConnection", exact=True).click()
    await pick_block(page, field, "production")
    run = await submit_and_read(page, prefect_ui, deployment)
    assert run["parameters"]["dashboard"] == {"$ref": {"block_document_id": prefect_ui.block_id}}
    assert (run["parameters"]["email_block"], run["parameters"]["at"]) == (None, None)


async def pick_block(page: Any, field: Any, name: str) -> None:
    """Pick a saved block as a person does: open the picker until the saved blocks are listed (they load after it
    appears), choose one, and wait until the picker shows it, picking again if it does not. CI once submitted this
    form with no block after the option's click (a loaded machine); the picker shows the block's name a moment after
    the click here, and only then is the pick sure to be the form's."""
    control = field.locator(".p-select-button__control")
    option = page.get_by_role("option", name=name, exact=True)
    for _ in range(10):
        await control.click()
        await page.keyboard.press("ArrowDown")
        try:
            await option.wait_for(timeout=2_000)
            await option.click()
            await control.filter(has_text=name).wait_for(timeout=10_000)
            return
        except Exception:
            await page.keyboard.press("Escape")
    pytest.fail(f"the saved block {name!r} could not be picked: the picker shows {await control.inner_text()!r}")
