"""Accounting for a run that was killed mid-night: every item it applied gets an outcome in the next run.

The killed run journalled every write call before sending it (`fleet.state.job_journal`). Once its sites are quiet
and re-read, an item it meant to update is accounted for as `updated` by it when it is no longer pending at
the version it had then; an item still pending is not, and the new run plans and applies it as its own. Before the
new run writes anything, the sites the killed run wrote to are judged as its own step would have judged them
(`steps_to_judge`): a site down now is a break by the releases it got, so none of them reaches another site.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fleet.model.keys import item_key
from fleet.model.summary import HealthCheck, Item, Outcome, UpdateType
from fleet.rules.breakage import SUSPECT_OUTCOMES
from fleet.rules.execution import APPLY_ORDER
from fleet.rules.plan import Decision, DetectedUpdate, PlanItem, SiteRecord, SiteStatus
from fleet.state.job_journal import OpenRun


@dataclass
class Accounting:
    """What a night found of the killed runs it took over: their items, and the checks of the sites their releases
    broke (judged before the night's first write)."""

    items: list[Item]
    checks: dict[int, HealthCheck] = field(default_factory=dict)


def touched_sites(runs: list[OpenRun], answered: bool | None = None) -> list[int]:
    """Sites the runs sent update calls for (only those whose answer never came, with `answered=False`)."""
    return sorted({site_id for run in runs for intent in run.intents
                   if intent.kind == "update" and (answered is None or intent.answered == answered)
                   for site_id in intent.site_ids})


def account_interrupted(runs: list[OpenRun], sites: dict[int, SiteRecord], fresh: list[DetectedUpdate],
                        unreadable: dict[int, str] | None = None, broken: set[int] | None = None) -> list[Item]:
    """The items the interrupted runs applied, each with the run that applied it.

    `sites` are the runs' sites as tonight found them and `fresh` their pending list read tonight. On a site synced
    tonight an item no longer pending is `updated`; on one tonight's sync could not reach (offline, disconnected,
    ...) the list is the dashboard's last one, so the item is `unknown`, with the run that sent it and why it is not
    verified, unless the site is `broken` by those runs' releases (it fails its probe since): then the dashboard's
    list is the proof that it landed, as a night's own item the dashboard answered `updated` for before the site
    stopped answering. An item on a site that could not be read at all (`unreadable`: removed from the dashboard,
    or its read failed), or of a run given up after `ACCOUNTING_TRIES`, is `unknown` with why; an item on any other
    site not in `sites` is left out (nothing is known of it: tonight's selection left it, and a later night reads
    it). Several killed runs may each have written the same item (one after the other, each taking over the
    last): each write is its own item, of the run that sent it, landed when the next run found the item moved on
    from where that write started (or, for the last, as tonight's list says).
    """
    unreadable = unreadable or {}
    now = {update.key: update for update in fresh}
    hops: dict[tuple[int, UpdateType, str], list[tuple[OpenRun, str, str]]] = {}  # each item's writes, in run order
    for run in runs:
        for intent in run.intents:
            if intent.kind != "update" or intent.type is None:
                continue
            for site_id, slug, version, offered in intent.items:
                chain = hops.setdefault((site_id, intent.type, slug), [])
                if not any(sent.run_id == run.run_id and (v, o) == (version, offered) for sent, v, o in chain):
                    chain.append((run, version, offered))
    accounted: list[Item] = []
    for (site_id, type_, slug), chain in hops.items():
        site, pending = sites.get(site_id), now.get((site_id, type_, slug))
        for index, (run, version, offered) in enumerate(chain):
            why = given_up(run) if run.given_up else unreadable.get(site_id)
            if why is not None:
                accounted.append(unverified_item(run, site_id, type_, slug, version, offered, site, why))
                continue
            if site is None:
                break
            later = chain[index + 1] if index + 1 < len(chain) else None
            if later is not None:  # the next run found what this one left installed: the version it sent from
                if (later[1] or "") == (version or ""):
                    continue  # this write did not land: the next run found the item where it was and sent it again
                to_version = later[1] or offered or None
            elif pending is not None and (pending.from_version or "") == version:
                break  # still pending at the version it had then: the new run plans and applies it as its own
            else:
                to_version = pending.from_version if pending is not None else offered or None
            verified = site.status is SiteStatus.online
            landed = verified or site_id in (broken or set())
            accounted.append(Item(
                site_id=site_id, site_url=site.url, site_name=site.name, client=site.client, type=type_,
                slug=slug, name=slug, from_version=version or None,
                to_version=to_version, outcome=Outcome.updated if landed else Outcome.unknown,
                reason=f"applied by the interrupted run {run.run_id}" if verified else
                f"applied by the interrupted run {run.run_id} (gone from the dashboard's list); the site fails "
                f"its probe since, and its sync ({site.status_reason or site.status.value})" if landed else
                f"sent by the interrupted run {run.run_id} and gone from the dashboard's list, but the site "
                f"could not be synced tonight to verify it ({site.status_reason or site.status.value})",
                applied_by_run=run.run_id,
            ))
    return accounted


def given_up(run: OpenRun) -> str:
    return (f"{run.tries} runs took the interrupted run over and did not finish: it is closed without reading the "
            "dashboard")


def unverified_item(run: OpenRun, site_id: int, type_: UpdateType, slug: str, version: str, offered: str,
                    site: SiteRecord | None, why: str) -> Item:
    """An item the killed run sent that cannot be verified: `unknown`, saying which run sent it and why."""
    return Item(site_id=site_id, site_url=site.url if site else f"site {site_id}",
                site_name=site.name if site else f"site {site_id}", client=site.client if site else None, type=type_,
                slug=slug, name=slug, from_version=version or None, to_version=offered or None, outcome=Outcome.unknown,
                reason=f"sent by the interrupted run {run.run_id}; not verified: {why}", applied_by_run=run.run_id)


def steps_to_judge(accounted: list[Item]) -> dict[UpdateType, list[PlanItem]]:
    """The killed runs' items that landed or may have (`updated`, `unknown`), by the step a site found down is
    judged after: plugins where any plugin was sent (the step a load-fatal release comes from, and the one that can
    be contained and revived), else the last type sent (translations, plugins, themes, core is the order applied)."""
    by_site: dict[int, list[Item]] = {}
    for item in accounted:
        if item.outcome in SUSPECT_OUTCOMES:
            by_site.setdefault(item.site_id, []).append(item)
    steps: dict[UpdateType, list[PlanItem]] = {}
    for items in by_site.values():
        types = {item.type for item in items}
        step = UpdateType.plugin if UpdateType.plugin in types else max(types, key=list(APPLY_ORDER).index)
        latest = {item_key(item): item for item in items if item.type is step}  # several runs' writes: the last
        steps.setdefault(step, []).extend(
            PlanItem(site_id=item.site_id, type=item.type, slug=item.slug, name=item.name,
                     from_version=item.from_version, to_version=item.to_version, decision=Decision.apply)
            for item in latest.values())
    return steps
