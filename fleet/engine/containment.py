"""One break stays one break: a site that fails its probe after an update step gets nothing more tonight, and
the versions that step applied to it are sent to no other site for the rest of the night (later steps, lanes
and cohorts); from the next night on they are held by the nights' memory (`fleet.state.holds`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.engine.site_probe import ProbeResult
from fleet.model.keys import ItemKey, VersionKey, item_key, offered_key
from fleet.model.summary import Containment, Item, Outcome, SiteLook
from fleet.rules.plan import Decision, PlanItem, SiteRecord
from fleet.rules.reconcile import summary_item


def newly_broken(before: dict[int, ProbeResult], after: dict[int, ProbeResult]) -> set[int]:
    """Sites that passed the probe before the night and fail it now."""
    return {site_id for site_id, probe in after.items()
            if not probe.ok and site_id in before and before[site_id].ok}


@dataclass
class Withheld:
    """A step's items after tonight's breaks: those still sent, and the slugs its calls must now leave alone."""

    sent: list[PlanItem]
    untouchable: dict[int, list[str]]
    held: dict[ItemKey, str]  # -> why it was not sent
    gated: set[ItemKey] = field(default_factory=set)  # now waiting at the approval gate: a version under review


@dataclass
class TonightsBreaks:
    """The sites broken so far tonight and the versions that broke them, shared by every lane of the night."""

    sites: dict[int, str] = field(default_factory=dict)  # site id -> the step after which it broke
    versions: dict[VersionKey, str] = field(default_factory=dict)  # -> the site it broke
    containments: dict[int, Containment] = field(default_factory=dict)  # site id -> what was done about it
    reviews: dict[VersionKey, str] = field(default_factory=dict)  # a version that changed a site's look -> why

    def learn(self, site_id: int, site_name: str, step: str, applied: list[PlanItem]) -> None:
        self.sites[site_id] = step
        for item in applied:
            if item.to_version:
                self.versions.setdefault(offered_key(item), site_name)

    def why_not_sent(self, item: PlanItem) -> str | None:
        """Why `item` must not be sent now, or None."""
        if item.site_id in self.sites:
            return (f"not sent: the site failed its home-page probe after tonight's {self.sites[item.site_id]} "
                    "updates, so nothing more was sent to it")
        broke = self.versions.get(offered_key(item))
        if broke is not None:
            return f"held tonight: version {item.to_version} broke {broke} earlier in this night"
        return None

    def withhold(self, items: list[PlanItem], untouchable: dict[int, list[str]]) -> Withheld:
        """A step's items less those tonight's breaks stop; a stopped item's slug joins the untouchable ones so
        that a call naming its site does not update it anyway."""
        kept = Withheld(sent=[], untouchable={site_id: list(slugs) for site_id, slugs in untouchable.items()},
                        held={})
        for item in items:
            why = self.why_not_sent(item)
            review = (self.reviews.get(offered_key(item))
                      if why is None and not item.approved_by else None)  # approved: a person saw the change
            if why is None and review is None:
                kept.sent.append(item)
                continue
            if review is not None:  # a person looks at the images first, at the night's approval gate
                item.decision, item.reason = Decision.awaiting_approval, review
                kept.gated.add(item_key(item))
            else:
                kept.held[item_key(item)] = why or ""
            kept.untouchable.setdefault(item.site_id, []).append(item.slug)
        return kept

    def tell_reviews(self, waiting: list[PlanItem]) -> None:
        """Items waiting at the gate for the policy's own reasons are told when their version changed how a site
        looks tonight, so that the person approving them knows."""
        for item in waiting:
            review = self.reviews.get(offered_key(item))
            if review and review not in (item.reason or ""):
                item.reason = f"{item.reason}; {review}" if item.reason else review

    def learn_review(self, look: SiteLook, applied: list[PlanItem]) -> None:
        """A site that looks different (the review band) after a step: the versions the step applied to it wait
        for a person before they go to more sites tonight."""
        page = look.worst
        where = f" (see {page.diff})" if page is not None and page.diff else ""
        for item in applied:
            if item.to_version:
                self.reviews.setdefault(offered_key(item),
                                        f"version {item.to_version} changed how {look.site_name} looks: "
                                        f"{look.headline}{where}")

    def learn_break(self, site_id: int, site_name: str, containment: Containment, applied: list[PlanItem]) -> None:
        """A site broken after a step: with its culprit found, only the culprit's version goes nowhere else
        tonight (the step's other items are innocent); without, every item the step applied to it."""
        culprit = containment.culprit
        if culprit is not None:
            applied = [item for item in applied if (item.type, item.slug) == (culprit.type, culprit.slug)]
        self.learn(site_id, site_name, containment.step.value, applied)
        self.containments[site_id] = containment


def held_items(items: list[PlanItem], sites: list[SiteRecord], held: dict[ItemKey, str]) -> list[Item]:
    """The summary's rows of the items tonight's breaks kept back."""
    by_id = {site.id: site for site in sites}
    return [summary_item(item, by_id[item.site_id], Outcome.held, held[item_key(item)],
                         rule="broken_tonight")
            for item in items if item_key(item) in held]
