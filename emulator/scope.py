"""What every request handler reaches through its emulator, REST (`RestRequest`) and abilities
(`AbilityContext`) alike, so both interfaces act on the one dashboard the same way."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emulator.jobs import BatchJobs
    from emulator.operations import SiteOperations
    from emulator.services import Emulator
    from emulator.state import FleetState


class EmulatorScope:
    """Mixin for a handler's context; the subclass declares the `emulator` field."""

    emulator: Emulator

    @property
    def state(self) -> FleetState:
        return self.emulator.state

    @property
    def ops(self) -> SiteOperations:
        return self.emulator.operations

    @property
    def jobs(self) -> BatchJobs:
        return self.emulator.jobs

    @property
    def ns(self) -> str:
        return self.emulator.config.namespace

    def code(self, suffix: str) -> str:
        """A namespaced error code: `code("rest_invalid_site_id")` -> `svc_rest_invalid_site_id`."""
        return f"{self.ns}_{suffix}"
