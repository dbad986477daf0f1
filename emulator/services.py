"""The services of one emulated dashboard as the modules below `emulator.app` reach them (`request.app.state.emulator`).

A Protocol, so that the handlers, the routes and the middleware can name what they use without importing
`emulator.app`, which imports them all; `emulator.app.Emulator` is the one class that has these members.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from emulator.capacity import Capacity
    from emulator.clock import Clock
    from emulator.config import EmulatorConfig
    from emulator.faults import FaultController
    from emulator.feed_control import FeedControl
    from emulator.guard import GuardDesk
    from emulator.jobs import BatchJobs
    from emulator.operations import SiteOperations
    from emulator.state import FleetState


class Emulator(Protocol):
    """What a handler reaches of its dashboard: each member is the one service of that name."""

    config: EmulatorConfig
    state: FleetState
    clock: Clock
    capacity: Capacity
    operations: SiteOperations
    faults: FaultController
    jobs: BatchJobs
    feed: FeedControl
    guards: GuardDesk
    base_url: str
