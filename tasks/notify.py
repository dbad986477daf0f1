"""Notify step: deliver a run's rendered reports, record every recipient's fate, fail loudly if any missed."""

from __future__ import annotations

import asyncio

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.logging import get_run_logger

from fleet.model.events import reports_event
from fleet.model.summary import Delivery
from orchestration.events import emit
from reporting.result import ReportDeliveryError, delivery_problems
from reporting.run_report import RenderedRun, deliver_reports
from reporting.settings import MailSettings


@task(name="notify", cache_policy=NO_CACHE, persist_result=False, retries=0)
async def notify_task(rendered: RenderedRun, settings: MailSettings | None = None) -> list[Delivery]:
    """Send (or write as .eml) every report; raise ReportDeliveryError naming each recipient not reached.

    No Prefect retries: a retry would send again to the recipients who already have the message.
    """
    logger = get_run_logger()
    settings = settings or MailSettings()
    deliveries = await asyncio.to_thread(deliver_reports, rendered, settings)
    for delivery in deliveries:
        logger.info("%s report -> %s: %s", delivery.report, delivery.recipient or "(file)", delivery.answer)
    problems = delivery_problems(deliveries)
    emit([reports_event(rendered.run_id, rendered.dashboard, deliveries, problems)])
    if problems:
        raise ReportDeliveryError(f"run {rendered.run_id}: " + "; ".join(problems))
    return deliveries
