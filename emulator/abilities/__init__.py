"""The Abilities interface (`/wp-json/wp-abilities/v1`) and the background jobs behind it.

`mount_abilities(app)` adds both to an app built by `emulator.app.create_app`: the routes go before the
`/wp-json/{path}` catch-all and the job runner joins the app's lifespan.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette

from emulator.abilities.routes import abilities_routes
from emulator.jobs import batch_jobs, running_jobs

__all__ = ["abilities_routes", "batch_jobs", "mount_abilities"]


def mount_abilities(app: Starlette) -> None:
    """Serve the abilities from `app` and run background jobs while the app runs."""
    emulator = app.state.emulator
    if emulator.extras.get("abilities_mounted"):
        return
    emulator.extras["abilities_mounted"] = True
    routes = app.router.routes
    catch_all = next((i for i, r in enumerate(routes) if getattr(r, "path", "") == "/wp-json"), len(routes))
    routes[catch_all:catch_all] = abilities_routes(emulator)
    previous = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        async with previous(application) as maybe_state, running_jobs(emulator):
            yield maybe_state

    app.router.lifespan_context = lifespan
    batch_jobs(emulator)
