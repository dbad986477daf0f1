"""The combined report step: `estate.json`, the estate report, and its delivery to the operator."""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import acreate_markdown_artifact

from fleet.engine.estate import Estate
from fleet.model.summary import Delivery
from reporting.settings import MailSettings


@task(name="estate-report")
async def report_estate_task(estate: Estate, directory: Path, settings: MailSettings | None) -> list[Delivery]:
    """Write `estate.json` and the combined report into `directory`; deliver it when `settings` are given."""
    from reporting.estate import deliver_estate, render_estate  # pandas loads for the report, not for `fleet serve`

    estate.write(directory)
    files = render_estate(estate, directory)
    deliveries = deliver_estate(estate, directory, settings) if settings else []
    totals = estate.totals
    await acreate_markdown_artifact(
        key="estate-report",
        markdown=f"**{len(estate.nights)} dashboards**: {totals.sites} sites, {totals.updated} updated, "
        f"{totals.failed} failed. Report: `{files[0]}`"
        + "".join(f"\n- {problem}" for problem in estate.problems),
        description="The night over every dashboard",
    )
    logger = get_run_logger()
    logger.info("combined report: %s", files[0])
    for delivery in deliveries:
        if not delivery.accepted:
            logger.warning("combined report to %s: %s", delivery.recipient or "nobody", delivery.answer)
    return deliveries
