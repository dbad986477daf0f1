"""The flows' parameters render as a described form in the Prefect UI (types, enums, descriptions)."""

from __future__ import annotations

import pytest
from prefect.utilities.callables import parameter_schema

from flows.check import check_fleet
from flows.nightly import nightly_maintenance
from flows.sync import sync_fleet
from flows.update import update_fleet


@pytest.mark.parametrize("flow", [nightly_maintenance, update_fleet, sync_fleet, check_fleet])
def test_every_parameter_is_typed_and_described(flow):
    schema = parameter_schema(flow.fn).model_dump()
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{flow.name}: {name} has no description"
    selection = schema["definitions"]["Selection"]["properties"]
    assert schema["definitions"]["UpdateType"]["enum"] == ["translation", "plugin", "theme", "core"]
    assert selection["types"]["items"] == {"$ref": "#/definitions/UpdateType"}
