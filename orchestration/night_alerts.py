"""The operator's alerts during the night, and its events, as the engine's `Outbox` (`fleet.engine.outbox`): sent the
moment the night knows, rather than at its end; bad mail settings never stop it (the file is still written)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.model.events import FleetEvent, still_down_event
from fleet.model.settings import PipelineSettings
from fleet.model.summary import Containment, Incident, Summary
from fleet.rules.breakage import site_page
from fleet.rules.plan import PlanItem, SiteRecord
from orchestration.events import emit
from reporting.alert import (
    BreakNotice,
    StillDownNotice,
    VulnerabilityNotice,
    dashboard_name,
    deliver_alert,
    release_of,
    run_link,
)
from reporting.settings import MailSettings, notify_block_alone

if TYPE_CHECKING:
    from dashboard.client import DashboardClient

log = logging.getLogger("fleet.contain")  # where the night's alerts have always logged


class NightOutbox:
    """The night's `Outbox` in a Prefect run: events to Prefect, alerts by mail (or `.eml` under the alerts folder)
    and the chat."""

    def emit(self, events: Iterable[FleetEvent]) -> None:
        emit(events)

    async def alert_break(self, client: DashboardClient, site: SiteRecord, containment: Containment,
                          applied: list[PlanItem], run_id: str, report_dir: Path) -> list[str]:
        """The operator's one message about this break, now rather than at the end of the night (mail, or `.eml`
        under the alerts folder, and the chat): the site, the release, what the night did, what to do."""
        base = client.settings.base_url
        notice = BreakNotice.of(containment, run_name=run_id, dashboard=dashboard_name(base), site_id=site.id,
                                site=f"{site.name} ({site.url})", release=release_of(containment, applied),
                                dashboard_page=site_page(base, site.id), run_url=run_ui_url())
        return await deliver_alert(notice, night_mail_settings("break alert"), report_dir / "alerts")

    async def alert_still_down(self, incident: Incident, run_id: str, dashboard: str, today: date,
                               settings: PipelineSettings) -> None:
        """The operator's reminder (mail, or `.eml` under the alerts folder) that a site is still down."""
        notice = StillDownNotice(
            run_name=run_id, dashboard=dashboard_name(dashboard), incident_id=incident.id,
            site=f"{incident.site_name} ({incident.site_url})", opened_by=incident.opened_by,
            age_days=incident.age_days(today),
            saw=incident.last_look, done=incident.done, next_steps=incident.next_steps,
            dashboard_page=incident.dashboard_page, run_url=run_ui_url())
        emit([still_down_event(incident, run_id, notice.age_days)])
        await deliver_alert(notice, night_mail_settings("still-down alert"), settings.report_dir / "alerts")


def night_mail_settings(what: str) -> MailSettings:
    """The mail settings for an alert sent during the night; bad ones must not stop it (the file is still written)."""
    try:
        return MailSettings()
    except ValueError as error:
        log.error("%s: mail settings unusable (%s): only the file is written", what, error)
        return MailSettings.model_construct(smtp_host=None, report_to=[], alert_blocks=[],
                                            notify_block=notify_block_alone())


def run_ui_url() -> str | None:
    """This flow run's page in the Prefect UI (None outside a run, or without a UI URL), as every message links it."""
    from prefect.runtime import flow_run

    return run_link(flow_run.id)


async def tell_vulnerability_news(summary: Summary, alerts: Path) -> None:
    """Each vulnerability the night saw first (at or above the policy's threshold) to the operator, once: by e-mail
    (or `.eml`) and through the notification blocks. Bad mail settings never stop the night (the file is written)."""
    for news in summary.security_news:
        notice = VulnerabilityNotice(run_name=summary.run_id, dashboard=dashboard_name(summary.dashboard), news=news,
                                     run_url=run_ui_url())
        await deliver_alert(notice, MailSettings.alerts_only(), alerts)
