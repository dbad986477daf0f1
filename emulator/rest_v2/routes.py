"""All REST v2 families in one route table (order matters where patterns overlap)."""

from __future__ import annotations

from emulator.rest import RestRoutes
from emulator.rest_v2 import (
    batch,
    clients,
    content,
    costs,
    extensions,
    keys,
    monitors,
    settings,
    sites,
    tags,
    time_tracker,
    updates,
    users,
)


def build_v2_routes() -> RestRoutes:
    table = RestRoutes()
    for family in (
        batch,
        sites,
        updates,
        tags,
        clients,
        costs,
        monitors,
        keys,
        settings,
        content,
        users,
        extensions,
        time_tracker,
    ):
        table.include(family.routes)
    return table
