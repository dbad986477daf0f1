"""Send the night's events (`fleet.model.events`) to Prefect, where automations count and act on them. Outside a
Prefect run (a plain-function test) nothing is sent; an event that cannot be sent is logged, never raised: an event
must not stop the night."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prefect.events import emit_event

from fleet.model.events import FleetEvent

log = logging.getLogger(__name__)


def emit(events: Iterable[FleetEvent]) -> None:
    for event in events:
        try:
            emit_event(event=event.event, resource=event.resource, related=event.related, payload=event.payload)
        except Exception as error:  # noqa: BLE001 - too large, or a client that failed: the night goes on
            log.warning("event %s about %s not sent: %s", event.event, event.resource.get("prefect.resource.id"),
                        error)
