"""One break stays one break: a site that fails its probe after an update step gets nothing more tonight, and
the versions that step applied to it are sent to no other site for the rest of the night (later steps, lanes
and cohorts); from the next night on they are held by the nights' memory (`fleet.holds`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.plan import PlanItem
from fleet.site_probe import ProbeResult
from fleet.summary import UpdateType

VersionKey = tuple[UpdateType, str, str]  # (type, slug, version)


def newly_broken(before: dict[int, ProbeResult], after: dict[int, ProbeResult]) -> set[int]:
    """Sites that passed the probe before the night and fail it now."""
    return {site_id for site_id, probe in after.items()
            if not probe.ok and site_id in before and before[site_id].ok}


@dataclass
class TonightsBreaks:
    """The sites broken so far tonight and the versions that broke them, shared by every lane of the night."""

    sites: dict[int, str] = field(default_factory=dict)  # site id -> the step after which it broke
    versions: dict[VersionKey, str] = field(default_factory=dict)  # -> the site it broke

    def learn(self, site_id: int, site_name: str, step: str, applied: list[PlanItem]) -> None:
        self.sites[site_id] = step
        for item in applied:
            if item.to_version:
                self.versions.setdefault((item.type, item.slug, item.to_version), site_name)

    def why_not_sent(self, item: PlanItem) -> str | None:
        """Why `item` must not be sent now, or None."""
        if item.site_id in self.sites:
            return (f"not sent: the site failed its home-page probe after tonight's {self.sites[item.site_id]} "
                    "updates, so nothing more was sent to it")
        broke = self.versions.get((item.type, item.slug, item.to_version or ""))
        if broke is not None:
            return f"held tonight: version {item.to_version} broke {broke} earlier in this night"
        return None
