"""Each site's Fleet Guard as the night will find it: whether it answers (and to which of the fleet's keys), its
version, what it pauses and keeps, and whether the night can count on it (`fleet guard status`; the night asks
the same question of a site it finds down)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from fleet.engine.site_probe import probe_url
from fleet.model.settings import PipelineSettings
from fleet.pacing.fan_out import fan_out
from guard.client import GuardClient, GuardError, GuardSilent, GuardSite
from guard.keys import load_keys
from guard.models import GuardStatus
from guard.settings import GuardSettings


@dataclass
class SiteGuard:
    site_id: int
    name: str
    url: str
    answers: str  # "yes", "yes, to the previous key", or "no: why"
    version: str = ""
    paused: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # "plugin:slug: 1.0, 1.1"
    problems: list[str] = field(default_factory=list)
    usable: bool = False
    verdict: str = ""  # what the night can do with it

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def guard_site(url: str, settings: PipelineSettings) -> GuardSite:
    """Where a site's guard is asked: its own page, or the probe template's address (an emulator's)."""
    return GuardSite(url, probe_url(url, settings.probe_url_template))


def verdict(status: GuardStatus) -> tuple[bool, str]:
    """(the night counts on it, why or why not)."""
    why = status.unusable
    if why is not None:
        return False, f"cannot revive it: {why}"
    if status.key == "previous":
        return True, ("counts on it (it accepts only the key before the rotation: install the guard `fleet guard "
                      "build` makes now)")
    if status.problems:
        return True, f"counts on it to pause; {'; '.join(status.problems)}"
    return True, "counts on it"


def row_of(site_id: int, name: str, url: str, status: GuardStatus | None, failure: str = "") -> SiteGuard:
    if status is None:
        return SiteGuard(site_id, name, url, f"no: {failure}" if failure else "no",
                         verdict="cannot revive it: no guard answers")
    usable, said = verdict(status)
    return SiteGuard(site_id, name, url, "yes" if status.key == "current" else "yes, to the previous key",
                     version=status.version, paused=status.paused,
                     kept=[f"{key}: {', '.join(kept.version for kept in versions)}"
                           for key, versions in sorted(status.kept.items())],
                     problems=status.problems, usable=usable, verdict=said)


async def roll_call(transport: httpx.AsyncBaseTransport | None = None) -> list[SiteGuard]:
    """Every site of the dashboard in FLEET_*: its guard's answer."""
    from dashboard.client import DashboardClient

    keys = load_keys()
    guard_settings, settings = GuardSettings(), PipelineSettings()
    async with DashboardClient.from_env() as dashboard:
        sites = await dashboard.list_sites()
    async with httpx.AsyncClient(transport=transport, timeout=guard_settings.guard_timeout,
                                 verify=settings.verify_tls) as http:
        client = GuardClient(http, keys)

        async def ask(site: Any) -> SiteGuard:
            try:
                status = await client.status(guard_site(site.url, settings))
            except GuardSilent:
                return row_of(site.id, site.name, site.url, None)
            except GuardError as error:
                return row_of(site.id, site.name, site.url, None, str(error).split(": ", 2)[-1])
            return row_of(site.id, site.name, site.url, status)

        return await fan_out(sorted(sites, key=lambda site: site.id), ask, guard_settings.guard_concurrency)
