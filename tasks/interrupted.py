"""Before and after tonight's survey: the runs that were killed mid-run.

First they are told as what they are (their Prefect flow runs, left Running, marked Crashed) and their sites are
left to go quiet (a call whose answer never came may still run on the dashboard, and planning it again would apply
it twice); after the survey, every item they applied is accounted for. Nothing here fails the night: a site that
cannot be read is said and its items are `unknown`, and the night does its own work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from dashboard.errors import DashboardError, SiteNotFound
from fleet.engine.interrupted import account_interrupted, touched_sites
from fleet.engine.lost_answers import wait_for_quiet_sites
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Item
from fleet.pacing.call_sizing import CallSizer, Operation
from fleet.rules.dashboard_records import site_record
from fleet.rules.plan import DetectedUpdate, SiteRecord, SiteStatus
from fleet.state.job_journal import OpenRun
from tasks.detect import detect_updates
from tasks.limits import mark_crashed
from tasks.progress import step_logger
from tasks.retries import STEP_OPTIONS
from tasks.sync import sync_sites

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

REMOVED = "the site was removed from the dashboard"


async def wait_for_interrupted_runs(
    client: DashboardClient, runs: list[OpenRun], sizer: CallSizer, settings: PipelineSettings, run_id: str
) -> None:
    """Tell the killed runs' flow runs as crashed, then wait until the sites of calls they sent without reading an
    answer are quiet."""
    for run in runs:
        if run.flow_run_id:
            await mark_crashed(run.flow_run_id, f"its process ended without finishing; run {run_id} accounts for "
                               f"the run {run.run_id}")
    unanswered = touched_sites(runs, answered=False)
    landed = {(site_id, intent.type.value, slug, version) for run in runs for intent in run.intents
              if not intent.answered and intent.type is not None for site_id, slug, version, _ in intent.items}
    step_logger().warning("run(s) %s did not finish; %d site(s) had a call without an answer",
                          ", ".join(run.run_id for run in runs), len(unanswered))
    if unanswered:
        await wait_for_quiet_sites(client, unanswered, Operation.update_item, sizer, settings, step_logger(),
                                   landed)


async def account_interrupted_runs(
    client: DashboardClient,
    runs: list[OpenRun],
    sites: list[SiteRecord],
    pending: list[DetectedUpdate],
    sizer: CallSizer,
    settings: PipelineSettings,
) -> list[Item]:
    """The items the killed runs applied; their sites outside tonight's selection are synced and read here. A site
    gone from the dashboard, or whose read fails, leaves its items `unknown` with why."""
    logger = step_logger()
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
        failures = await sync_sites(client, others, settings, sizer)
        others = [site for site in others if site.id not in failures]
        synced |= {site.id: site for site in others}
        fresh += await detect_updates(client, [site.id for site in others], settings.concurrency)
    for site_id, why in unreadable.items():
        logger.warning("site %s, touched by interrupted run(s): %s; its items are unknown", site_id, why)
    items = account_interrupted(runs, synced, fresh, unreadable)
    logger.info("%d item(s) applied by interrupted run(s) %s are accounted for in this run", len(items),
                ", ".join(run.run_id for run in runs))
    return items


wait_for_interrupted_runs_task = task(wait_for_interrupted_runs, name="wait-for-interrupted-runs", **STEP_OPTIONS)
account_interrupted_runs_task = task(account_interrupted_runs, name="account-interrupted-runs", **STEP_OPTIONS)
