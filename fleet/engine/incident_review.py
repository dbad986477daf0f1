"""Step after the summary: the incidents across nights. Tonight's broken sites open incidents; each open one of an
earlier night is looked at (tonight's check of its site, or a check now, and its plugins), closed when its site
passes and nothing a night switched off is still off, and alerted again, at most once a day, while it is down."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dashboard.errors import DashboardError
from fleet.engine.batch_calls import CallGate
from fleet.engine.health_checks import check_sites
from fleet.engine.outbox import Outbox
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Incident, Summary
from fleet.pacing.call_sizing import CallSizer
from fleet.pacing.fan_out import fan_out
from fleet.rules.incidents import alert_due, broken_again, looked_at, opened
from fleet.rules.plan import SiteRecord
from fleet.state.incidents import IncidentStore

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

log = logging.getLogger("fleet.incidents")


async def review_incidents(
    client: DashboardClient, summary: Summary, sites: list[SiteRecord], settings: PipelineSettings,
    sizer: CallSizer | None = None, *, look: bool = True, gate: CallGate = CallGate(), outbox: Outbox,
) -> list[Incident]:
    """Open an incident per site broken tonight, look at the open ones of earlier nights (with `look`: a run that
    writes and checks, its checks through the run's `gate`) and alert again about those still down (through the
    `outbox`); returns the incidents the report shows: every open one, and those closed tonight."""
    store = IncidentStore(settings.state_path)
    dashboard = summary.dashboard or client.settings.base_url
    earlier = store.open_incidents(dashboard)
    if summary.dry_run or not look:
        return earlier
    now, run_id = summary.finished_at, summary.run_id
    checks = {site.site_id: site.check for site in summary.sites if site.check is not None}
    broken = {alarm.site_id: alarm for alarm in summary.broken}
    listed = {site.id: site for site in sites}
    unchecked = [listed[i.site_id] for i in earlier
                 if i.site_id in listed and i.site_id not in checks and i.site_id not in broken]
    if unchecked:
        checks |= await check_sites(client, unchecked, settings, sizer=sizer, gate=gate)
    # its plugins tell what is still off, and which suspect a repair by hand switched off (the culprit)
    active = await plugin_states(client, [i.site_id for i in earlier if (i.deactivated or (
        i.culprit is None and len(i.suspects) > 1)) and i.site_id in checks and i.site_id not in broken], settings)
    # a site broken again: what the dashboard last listed tells which plugins the old break left off are still off
    off_now = await plugin_states(client, [i.site_id for i in earlier if i.deactivated and i.site_id in broken],
                                  settings)
    shown: list[Incident] = []
    for incident in earlier:
        if incident.site_id in broken:
            incident = broken_again(incident, broken.pop(incident.site_id), checks.get(incident.site_id), run_id,
                                    off_now.get(incident.site_id))
        else:
            incident = looked_at(incident, checks.get(incident.site_id), active.get(incident.site_id), run_id, now)
        if alert_due(incident, run_id, now.date()):
            await outbox.alert_still_down(incident, run_id, dashboard, now.date(), settings)
            incident = incident.model_copy(update={"alerted_on": now.date()})
        shown.append(store.save(incident))
        if not incident.is_open:
            log.warning("incident %d closed: %s (%s)", incident.id, incident.site_name, incident.close_reason)
    for alarm in broken.values():
        incident = store.save(opened(alarm, checks.get(alarm.site_id), dashboard, run_id, now))
        log.warning("incident %d opened: %s: %s", incident.id, incident.site_name, incident.status)
        shown.append(incident)
    return shown


async def plugin_states(client: DashboardClient, site_ids: list[int], settings: PipelineSettings
                        ) -> dict[int, dict[str, bool]]:
    """Each site's plugins and whether each is active, as the dashboard lists them; a site whose list cannot be
    read is left out (what it has switched off is then not known)."""
    async def read(site_id: int) -> tuple[int, dict[str, bool] | None]:
        try:
            return site_id, {plugin.slug: plugin.active for plugin in await client.site_plugins(site_id)}
        except DashboardError as error:
            log.warning("the plugins of site %d could not be read: %s", site_id, error)
            return site_id, None

    return {site_id: found for site_id, found in await fan_out(site_ids, read, settings.concurrency)
            if found is not None}
