"""Before and after tonight's survey: the runs that were killed mid-run.

First they are told as what they are (their Prefect flow runs, left Running, marked Crashed) and their sites are
left to go quiet (a call whose answer never came may still run on the dashboard, and planning it again would apply
it twice); after the survey, every item they applied is accounted for, and before the night's first write the sites
they wrote to are judged as their own step would have judged them. Nothing here fails the night: a site that cannot
be read is said and its items are `unknown`, and the night does its own work.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from dashboard.errors import DashboardError, SiteNotFound
from fleet.engine.batch_calls import CallGate
from fleet.engine.containment import TonightsBreaks
from fleet.engine.detection import detect_updates
from fleet.engine.health_checks import check_sites
from fleet.engine.interrupted import Accounting, account_interrupted, steps_to_judge, touched_sites
from fleet.engine.lost_answers import wait_for_quiet_sites
from fleet.engine.outbox import Outbox
from fleet.engine.probe_after_step import probe_and_contain
from fleet.engine.site_probe import ProbeResult
from fleet.engine.sync import sync_sites
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Item
from fleet.model.vocabulary import count
from fleet.pacing.call_sizing import CallSizer, Operation
from fleet.pacing.progress import PLAIN_LOG, Log
from fleet.rules.dashboard_records import site_record
from fleet.rules.plan import DetectedUpdate, SiteRecord, SiteStatus
from fleet.rules.policy import Policy
from fleet.state.job_journal import OpenRun

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

REMOVED = "the site was removed from the dashboard"


async def wait_for_interrupted_runs(
    client: DashboardClient, runs: list[OpenRun], sizer: CallSizer, settings: PipelineSettings, run_id: str, *,
    mark_crashed: Callable[[str, str], Awaitable[None]], log: Log = PLAIN_LOG,
) -> None:
    """Tell the killed runs' flow runs as crashed (`mark_crashed`: the flow run's id, why), then wait until the
    sites of calls they sent without reading an answer are quiet."""
    for run in runs:
        if run.flow_run_id:
            await mark_crashed(run.flow_run_id, f"its process ended without finishing; run {run_id} accounts for "
                               f"the run {run.run_id}")
    unanswered = touched_sites(runs, answered=False)
    landed = {(site_id, intent.type.value, slug, version) for run in runs for intent in run.intents
              if not intent.answered and intent.type is not None for site_id, slug, version, _ in intent.items}
    log.warning("%s did not finish (%s); %s had a call without an answer", count(len(runs), "run"),
                ", ".join(run.run_id for run in runs), count(len(unanswered), "site"))
    if unanswered:
        await wait_for_quiet_sites(client, unanswered, Operation.update_item, sizer, settings, log, landed)


async def account_interrupted_runs(
    client: DashboardClient,
    runs: list[OpenRun],
    sites: list[SiteRecord],
    pending: list[DetectedUpdate],
    sizer: CallSizer,
    settings: PipelineSettings,
    breaks: TonightsBreaks | None = None,
    policy: Policy | None = None,
    run_id: str = "",
    *,
    gate: CallGate = CallGate(),
    outbox: Outbox,
) -> Accounting:
    """The items the killed runs applied; their sites outside tonight's selection are synced and read here. A site
    gone from the dashboard, or whose read fails, leaves its items `unknown` with why. With tonight's `breaks`
    (before its first write), the sites they wrote to are judged too (`judge_interrupted_sites`). Calls pass the
    run's `gate`; a break is told through the `outbox`."""
    logger = gate.log
    touched = set(touched_sites([run for run in runs if not run.given_up]))
    synced = {site.id: site for site in sites if site.id in touched}  # those tonight's sync refused: unknown
    fresh = [update for update in pending if update.site_id in synced]
    unreadable: dict[int, str] = {}
    others = []
    for site_id in sorted(touched - {site.id for site in sites}):
        try:
            others.append(site_record(await client.get_site(site_id), {}))
        except SiteNotFound:
            unreadable[site_id] = REMOVED
        except DashboardError as error:
            unreadable[site_id] = f"the site could not be read tonight: {error}"
    others = [site for site in others if site.status is SiteStatus.online]
    if others:
        failures = await sync_sites(client, others, settings, sizer, gate=gate)
        others = [site for site in others if site.id not in failures]
        synced |= {site.id: site for site in others}
        fresh += await detect_updates(client, [site.id for site in others], settings.concurrency)
    for site_id, why in unreadable.items():
        logger.warning("site %s, touched by %s (%s): %s; its items are unknown", site_id,
                       count(len(runs), "interrupted run"), ", ".join(run.run_id for run in runs), why)
    accounting = Accounting(account_interrupted(runs, synced, fresh, unreadable))
    if breaks is not None:
        broken = await judge_interrupted_sites(client, accounting.items, sites, breaks, policy or Policy(), run_id,
                                               settings, outbox=outbox, log=logger)
        if broken:  # their releases landed: the dashboard's list dropped them, and the sites failed since
            accounting = Accounting(account_interrupted(runs, synced, fresh, unreadable, set(broken)),
                                    await check_sites(client, list(broken.values()), settings, gate=gate))
    logger.info("this run accounts for %s applied by %s (%s)", count(len(accounting.items), "item"),
                count(len(runs), "interrupted run"), ", ".join(run.run_id for run in runs))
    return accounting


async def judge_interrupted_sites(
    client: DashboardClient, accounted: list[Item], sites: list[SiteRecord], breaks: TonightsBreaks, policy: Policy,
    run_id: str, settings: PipelineSettings, *, outbox: Outbox, log: Log = PLAIN_LOG,
) -> dict[int, SiteRecord]:
    """Each site the killed runs wrote to that fails its probe now is a break by the releases they sent it,
    contained (and revived) as their own step would have done, so that tonight sends those releases nowhere else
    and the summary opens its incident and holds them. Returns the broken sites.

    The killed run wrote only to sites its sync reached, so each is taken to have passed its probe before: a site
    down now that was down before is blamed on the releases it got, which holds them (never spreads them)."""
    by_id = {site.id: site for site in sites}
    broken: dict[int, SiteRecord] = {}
    for step, items in steps_to_judge(accounted).items():
        items = [item for item in items if item.site_id in by_id]
        stepped = [by_id[site_id] for site_id in sorted({item.site_id for item in items})]
        if stepped:
            before = {site.id: ProbeResult(ok=True) for site in stepped}
            contained = await probe_and_contain(client, before, stepped, step, items, breaks, policy, run_id,
                                                settings, outbox=outbox)
            broken |= {site_id: by_id[site_id] for site_id in contained}
    if broken:
        log.warning("the probe fails on %s (%s), updated by an interrupted run: broken by what it sent, which "
                    "is sent nowhere else", count(len(broken), "site"),
                    ", ".join(site.name for site in broken.values()))
    return broken
