"""The flows' parameters render as a described form in the Prefect UI (types, enums, descriptions)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import defaultdict
from pathlib import Path
from typing import Any, get_args

import pytest
from prefect import Flow
from prefect.utilities.callables import parameter_docstrings, parameter_schema
from pydantic.fields import FieldInfo

import flows
from dashboard.block import DashboardConnection
from dashboard.settings import DashboardSettings
from fleet.model.summary import Selection, Summary
from flows.check import check_fleet
from flows.nightly import nightly_maintenance
from flows.parameters import (
    DashboardDeployment,
    DashboardEnvironments,
    DashboardNames,
    DryRun,
    FleetSelection,
    LockWaitSeconds,
    PlanMoment,
    PolicyFile,
    ReportDir,
    SavedDashboard,
    SavedEmailServer,
    SendReport,
)
from flows.report import report
from flows.sync import sync_fleet
from flows.update import update_fleet

# Each parameter more than one flow takes, and its one definition.
SHARED: dict[str, Any] = {
    "selection": FleetSelection, "dry_run": DryRun, "policy_file": PolicyFile, "report_dir": ReportDir,
    "dashboard": SavedDashboard, "send_report": SendReport, "email_block": SavedEmailServer, "at": PlanMoment,
    "lock_wait_seconds": LockWaitSeconds, "dashboards": DashboardNames, "environment": DashboardEnvironments,
    "deployment": DashboardDeployment,
}


def every_flow() -> list[Flow]:
    """Every flow of the `flows` package, a new one included."""
    modules = [importlib.import_module(f"flows.{module.name}") for module in pkgutil.iter_modules(flows.__path__)]
    found = {value.name: value for module in modules for value in vars(module).values() if isinstance(value, Flow)}
    return list(found.values())


def defined_description(shared: Any) -> str:
    return next(meta.json_schema_extra["description"] for meta in get_args(shared) if isinstance(meta, FieldInfo))


@pytest.mark.parametrize("flow", [nightly_maintenance, update_fleet, sync_fleet, check_fleet])
def test_every_parameter_is_typed_and_described(flow):
    schema = parameter_schema(flow.fn).model_dump()
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{flow.name}: {name} has no description"
    selection = schema["definitions"]["Selection"]["properties"]
    assert schema["definitions"]["UpdateType"]["enum"] == ["translation", "plugin", "theme", "core"]
    assert selection["types"]["items"] == {"$ref": "#/definitions/UpdateType"}


@pytest.mark.parametrize("flow", [nightly_maintenance, update_fleet, sync_fleet, check_fleet, report])
def test_paths_are_plain_strings_and_blocks_are_pickers_of_saved_blocks(flow):
    schema = parameter_schema(flow.fn).model_dump()
    properties, definitions = schema["properties"], schema["definitions"]
    for name in ("policy_file", "report_dir"):
        if name in properties:
            assert properties[name]["type"] == "string" and properties[name]["default"] == ""
            assert "anyOf" not in properties[name]
    pickers = {"dashboard": "dashboard-connection", "email_block": "email-server-credentials"}
    for name, slug in pickers.items():
        if name in properties:  # the block's picker, or None (the default): the UI's validation accepts both
            options = properties[name]["anyOf"]
            assert {"type": "null"} in options and properties[name]["default"] is None
            ref = next(option["$ref"] for option in options if "$ref" in option).rsplit("/", 1)[1]
            assert definitions[ref]["block_type_slug"] == slug
    if "at" in properties:  # the date picker, or None (now)
        assert {"type": "null"} in properties["at"]["anyOf"]
        assert {"type": "string", "format": "date-time"} in properties["at"]["anyOf"]


def test_a_parameter_several_flows_take_reads_the_same_on_every_form_from_its_one_definition():
    takers: dict[str, list[str]] = defaultdict(list)
    found = every_flow()
    assert {"nightly-maintenance", "update-fleet", "sync-fleet", "check-fleet", "report", "security-patch",
            "maintain-dashboards", "patch-dashboards"} <= {flow.name for flow in found}
    for flow in found:
        properties = flow.parameters.model_dump_for_openapi()["properties"]  # what a deployment registers
        annotations = inspect.signature(flow.fn, eval_str=True).parameters
        restated = sorted(parameter_docstrings(inspect.getdoc(flow.fn)).keys() & SHARED.keys())
        assert not restated, f"{flow.name} describes {restated} again in its docstring"
        for name, field in properties.items():
            takers[name].append(flow.name)
            if name in SHARED:
                assert annotations[name].annotation is SHARED[name], f"{flow.name}: {name} is typed anew"
                assert field["description"] == defined_description(SHARED[name]), f"{flow.name}: {name}"
    assert {name for name, names in takers.items() if len(names) > 1} == SHARED.keys()


@pytest.mark.usefixtures("prefect_harness")
async def test_a_dashboard_block_given_as_the_parameter_is_the_connection_used(dashboard, monkeypatch):
    emulator = dashboard(sites=6, seed=2)
    connection = DashboardConnection.from_settings(DashboardSettings())
    monkeypatch.setenv("FLEET_BASE_URL", "http://127.0.0.1:9/wp-json")  # the environment would fail
    before = emulator.writes()
    path = await update_fleet(selection=Selection(sites=["1", "2"]), dry_run=True, dashboard=connection)
    assert {site.site_id for site in Summary.read(Path(path)).sites} == {1, 2}
    assert emulator.writes() == before
