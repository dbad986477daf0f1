"""Send the night's events (`fleet.model.events`) to Prefect, where automations count and act on them. Outside a
Prefect run (a plain-function test) nothing is sent; a failure to send is logged by Prefect, never raised: an
event must not stop the night."""

from __future__ import annotations

from collections.abc import Iterable

from prefect.events import emit_event

from fleet.model.events import FleetEvent


def emit(events: Iterable[FleetEvent]) -> None:
    for event in events:
        emit_event(event=event.event, resource=event.resource, related=event.related, payload=event.payload)
