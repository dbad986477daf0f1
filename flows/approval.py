"""The approval gate in the Prefect UI: the flow pauses with a typed form, a person approves or skips each item
(or all), and the night carries on. `fleet approve` answers the same form from a terminal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from prefect import get_run_logger
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import apause_flow_run
from prefect.input import RunInput
from prefect.runtime import flow_run
from pydantic import BaseModel, Field

from fleet.model.keys import item_key
from fleet.model.summary import ApprovalRecord
from fleet.model.vocabulary import count
from fleet.rules.approval import ApprovalAnswer
from fleet.rules.plan import Plan, PlanItem

POLL_SECONDS = 5
ANSWERED_IN_THE_UI = "the Prefect UI"


class ApprovalChoice(BaseModel):
    """One update waiting for a person."""

    site_id: int = Field(description="The site's id: the answer is matched by it.")
    site: str = Field(description="The site: id and address.")
    item: str = Field(description="`type:slug` of the update.")
    change: str = Field(description="Installed version -> offered version.")
    why: str = Field(description="Why the policy wants a person to look.")
    approve: bool = Field(False, description="Apply this update tonight.")


class ApprovalForm(RunInput):
    """Approve the updates that need a person; those left unticked are held until the next night."""

    approve_all: bool = Field(False, description="Approve every update below.")
    items: list[ApprovalChoice] = Field(default_factory=list, description="The updates waiting for approval.")
    approved_by: str = Field("", description="Your name, for the report.")


def form_items(plan: Plan, items: list[PlanItem]) -> list[ApprovalChoice]:
    sites = {site.id: site for site in plan.sites}
    return [
        ApprovalChoice(site_id=item.site_id, site=f"{item.site_id} {sites[item.site_id].domain}",
                       item=f"{item.type.value}:{item.slug}",
                       change=f"{item.from_version or '?'} -> {item.to_version or 'latest'}", why=item.reason or "")
        for item in items
    ]


def answer_from_form(form: ApprovalForm, items: list[PlanItem]) -> ApprovalAnswer:
    """Items are matched by site and `type:slug`, so a form whose rows were reordered still means the same."""
    ticked = {(choice.site_id, choice.item) for choice in form.items if choice.approve}
    approved = {item_key(item) for item in items
                if form.approve_all or (item.site_id, f"{item.type.value}:{item.slug}") in ticked}
    return ApprovalAnswer(approved=approved, by=form.approved_by.strip() or ANSWERED_IN_THE_UI)


async def tell_the_operator(rows: list[ApprovalChoice], until: str, dashboard_url: str, out_dir: Path) -> None:
    """The gate is open: the operator hears it on the alert channels (e-mail or `.eml`, notification blocks)."""
    from reporting.alert import ApprovalNotice, dashboard_name, deliver_alert, run_link
    from reporting.settings import MailSettings

    notice = ApprovalNotice(
        flow=flow_run.get_flow_name() or "nightly", run_name=flow_run.get_name() or "", run_id=flow_run.get_id() or "",
        dashboard=dashboard_name(dashboard_url), until=until,
        items=tuple(f"{row.site}: {row.item} {row.change} ({row.why})" for row in rows),
        ui_url=run_link(flow_run.get_id()),
    )
    try:
        settings = MailSettings()
    except ValueError as error:
        get_run_logger().error("approval notice: the mail settings are unusable (%s)", error)
        return
    await deliver_alert(notice, settings, out_dir)


async def ask_for_approval(
    plan: Plan, items: list[PlanItem], timeout_seconds: int, dashboard_url: str, out_dir: Path
) -> tuple[ApprovalAnswer, ApprovalRecord]:
    """Tell the operator, then pause the flow run until a person answers the form, or the timeout passes (then
    nothing is approved)."""
    logger = get_run_logger()
    opened = datetime.now(UTC)
    run_id = flow_run.get_id()
    from reporting.alert import run_link

    url = run_link(run_id)
    until = (opened + timedelta(seconds=timeout_seconds)).replace(microsecond=0).isoformat()
    logger.warning("approval needed: %s waiting for a person until %s; answer in the Prefect UI%s or with "
                   "`fleet approve %s --all`", count(len(items), "update"), until,
                   f" ({url})" if url else "", run_id)
    rows = form_items(plan, items)
    await tell_the_operator(rows, until, dashboard_url, out_dir)
    form = ApprovalForm.with_initial_data(
        description=f"{count(len(items), 'update')} waiting for a person's approval before being applied.", items=rows,
    )
    try:
        answer = answer_from_form(
            await apause_flow_run(wait_for_input=form, timeout=timeout_seconds,
                                  poll_interval=min(POLL_SECONDS, max(1, timeout_seconds // 2))),
            items,
        )
    except FlowPauseTimeout:
        logger.warning("approval gate: no answer within %d s; still held: %s", timeout_seconds,
                       count(len(items), "update"))
        answer = ApprovalAnswer(timed_out=True)
    record = ApprovalRecord(opened_at=opened, items=len(items), approved=len(answer.approved),
                            skipped=0 if answer.timed_out else len(items) - len(answer.approved),
                            timed_out=answer.timed_out, answered_by=answer.by, flow_run_id=run_id)
    return answer, record
