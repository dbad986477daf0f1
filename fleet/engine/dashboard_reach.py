"""Whether a saved dashboard answers, asked before its night: an unreachable dashboard gets no night."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dashboard.client import DashboardClient
from dashboard.errors import DashboardError, TransportError
from fleet.engine.estate import NightStatus

if TYPE_CHECKING:
    from dashboard.block import DashboardConnection

# The first contact only asks whether the dashboard answers: two quick tries, not the night's patient retries.
REACH_OVERRIDES: dict[str, Any] = {"max_attempts": 2, "connect_timeout": 5.0, "read_timeout": 30.0, "retry_cap": 2.0}



@dataclass(frozen=True)
class Reach:
    """Whether a saved dashboard answered: its address and site count, or why not."""

    block: str
    base_url: str | None = None
    sites: int | None = None
    status: NightStatus | None = None  # unreachable or not_started when it cannot have a night
    reason: str | None = None


async def reach_dashboard(block: str, connection: DashboardConnection) -> Reach:
    """Ask the dashboard of the loaded block `block` for its site count."""
    try:
        async with DashboardClient.from_block(connection, **REACH_OVERRIDES) as client:
            sites = await client.count_sites()
    except TransportError as error:
        return Reach(block, connection.base_url, status=NightStatus.unreachable, reason=str(error))
    except DashboardError as error:  # refused credentials, a broken answer: a night would fail the same way
        return Reach(block, connection.base_url, status=NightStatus.not_started, reason=str(error))
    return Reach(block, connection.base_url, sites=sites)
