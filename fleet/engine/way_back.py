"""The way back: the fixed release of a culprit the night deactivated is switched on first, on its site alone."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from dashboard.errors import DashboardError
from fleet.engine.containment import TonightsBreaks
from fleet.engine.culprit import switch_on_failed
from fleet.engine.outbox import Outbox
from fleet.rules.execution import CallResult, JobOutcome
from fleet.rules.plan import PlanItem, SiteRecord

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

log = logging.getLogger("fleet.contain")


async def switch_on_fixed_releases(
    client: DashboardClient, sent: list[PlanItem], calls: list[CallResult], jobs: list[JobOutcome],
    breaks: TonightsBreaks, sites: list[SiteRecord], run_id: str = "", report_dir: Path = Path("."), *,
    outbox: Outbox,
) -> list[PlanItem]:
    """The way back: switch on each deactivated culprit whose fixed release the dashboard answered installed (one
    still at the bad version stays off). A release that cannot be switched on (an error answer, such as the 500
    NOMAINWP of a release fatal at load, or an answer that leaves it off) is a break: it stays off, joins tonight's
    breaks (its site gets nothing more, the version goes nowhere else, the night holds it), the operator hears of
    it at once through the `outbox` (run `run_id`, alerts under `report_dir`) and the incident tells it. Returns
    the items switched on; the probe after the step judges them."""
    reports = [report for answer in [*calls, *jobs] for report in answer.reports]
    installed = {(report.site_id, report.slug) for report in reports if report.ok and report.slug is not None}
    by_id = {site.id: site for site in sites}
    names = {site.id: site.name for site in sites}
    switched = []
    for item in sent:
        if (item.site_id, item.slug) not in installed:
            log.warning("site %d: %s %s was not answered installed: it stays deactivated", item.site_id,
                        item.name or item.slug, item.to_version)
            continue
        try:
            answer = await client.activate_plugins(item.site_id, [item.slug])
        except DashboardError as error:
            why = str(error)
        else:
            if item.slug in answer.switched:
                log.info("site %d: %s %s installed and switched on (the way back)", item.site_id,
                         item.name or item.slug, item.to_version)
                switched.append(item)
                continue
            why = "; ".join(sorted({e.message or e.code for e in answer.errors})) or "the dashboard left it off"
        containment = switch_on_failed(item, why)
        breaks.learn_break(item.site_id, names.get(item.site_id, str(item.site_id)), containment, [item])
        log.warning("site %d: %s", item.site_id, containment.detail)
        if run_id:
            await outbox.alert_break(client, by_id[item.site_id], containment, [item], run_id, report_dir)
    return switched
