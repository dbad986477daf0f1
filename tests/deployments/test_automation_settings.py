"""The automations `fleet serve` keeps, built from their settings without a Prefect server: what each watches,
what it does, and the settings that tune or turn them off, with one line naming the variable when one is wrong."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

import pytest
from prefect.events.actions import DoNothing, PauseDeployment, SendNotification
from pydantic import ValidationError

from dashboard.home import settings_problem
from deployments.automations import (
    KILL_SWITCH,
    NIGHT_NOT_FINISHED,
    REPORTS_UNDELIVERED,
    AutomationSettings,
    said,
    wanted_automations,
)
from reporting.alert import Alert, BreakNotice
from reporting.settings import MailSettings


def settings(monkeypatch: pytest.MonkeyPatch, **values: str) -> AutomationSettings:
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return AutomationSettings()


def test_by_default_three_automations_notify_the_block_and_the_kill_switch_pauses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block = uuid4()
    wanted = {a.name: a for a in wanted_automations(settings(monkeypatch), block)}
    assert list(wanted) == [NIGHT_NOT_FINISHED, REPORTS_UNDELIVERED, KILL_SWITCH]
    late = wanted[NIGHT_NOT_FINISHED].trigger
    assert late.posture == "Proactive" and late.within == timedelta(hours=6)
    assert late.after == {"prefect.flow-run.Late", "prefect.flow-run.Pending"}
    assert "prefect.flow-run.Completed" in late.expect and "prefect.flow-run.Crashed" in late.expect
    assert late.match_related.model_dump()["prefect.resource.name"] == "nightly-maintenance"  # only the nights
    kill = wanted[KILL_SWITCH]
    assert kill.trigger.threshold == 6 and kill.trigger.within == timedelta(hours=1)  # more than 5 within an hour
    assert kill.trigger.expect == {"fleet.site.broken"}
    notify, pause = kill.actions
    assert isinstance(notify, SendNotification) and notify.block_document_id == block
    assert "To resume" in notify.body and "restart fleet serve" in notify.body
    assert isinstance(pause, PauseDeployment) and pause.source == "inferred"


def test_each_automation_turns_off_and_without_a_block_they_still_fire_in_the_event_feed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    off = settings(monkeypatch, FLEET_NIGHT_DEADLINE_HOURS="0", FLEET_KILL_SWITCH_SITES="0",
                   FLEET_UNDELIVERED_ALERT="false")
    assert wanted_automations(off, uuid4()) == []
    monkeypatch.delenv("FLEET_KILL_SWITCH_SITES")
    [kill] = wanted_automations(AutomationSettings(), None)
    assert isinstance(kill.actions[0], DoNothing) and isinstance(kill.actions[1], PauseDeployment)
    monkeypatch.setenv("FLEET_AUTOMATIONS", "false")
    monkeypatch.delenv("FLEET_NIGHT_DEADLINE_HOURS")
    assert wanted_automations(AutomationSettings(), uuid4()) == []


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("FLEET_NIGHT_DEADLINE_HOURS", "0.001", "at least 10 seconds"),
    ("FLEET_KILL_SWITCH_SITES", "-1", "greater than or equal to 0"),
    ("FLEET_NOTIFY_BLOCK", "ops", "is not `block-type-slug/name`"),
])
def test_a_wrong_setting_is_one_line_naming_its_variable(monkeypatch: pytest.MonkeyPatch, variable: str,
                                                         value: str, says: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as error:
        AutomationSettings()
    line = settings_problem(error.value)
    assert line.startswith(f"{variable} (environment): ") and says in line and "\n" not in line


def test_a_short_deadline_is_said_in_its_unit() -> None:
    durations = [timedelta(hours=6), timedelta(minutes=90), timedelta(minutes=45), timedelta(seconds=15)]
    assert [said(duration) for duration in durations] == ["6 h", "1.5 h", "45 min", "15 s"]


def test_the_notify_block_gets_one_short_line_with_the_link(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_NOTIFY_BLOCK", " custom-webhook/ops ")
    assert MailSettings().notify_block == "custom-webhook/ops"
    error = "\n".join(["SitesBrokenByRun: run 1 broke 2 sites: Shop, Blog", *(f"detail {n}" for n in range(20))])
    alert = Alert(flow="nightly-maintenance", run_name="brave-fox", run_id="1", state="Failed",
                  dashboard="dash.example.com", error=error, ui_url="http://prefect/runs/flow-run/1")
    assert alert.short == ("fleet-maintenance: the nightly-maintenance run brave-fox ended Failed (dashboard "
                           "dash.example.com): SitesBrokenByRun: run 1 broke 2 sites: Shop, Blog "
                           "http://prefect/runs/flow-run/1")
    down = BreakNotice(run_name="run-1", dashboard="dash.example.com", site_id=3, site="Shop (https://shop)",
                       step="plugin", release="Forms 1.3 → 1.4", did="could switch nothing off", saw="HTTP 500",
                       next_steps="restart PHP on its server", down=True, dashboard_page="https://dash/page/3",
                       run_url="http://prefect/runs/flow-run/1")
    assert "\n" not in down.short and down.short.endswith("http://prefect/runs/flow-run/1")
    assert "Shop (https://shop) is down, unreachable by the dashboard" in down.short and "Forms 1.3 → 1.4" in down.short


def test_the_kill_switch_message_ends_without_a_stray_none() -> None:
    """Rendered as Prefect's server renders it, for an event that names no flow run (and a server without a UI
    address): the message ends with its last sentence, not "None"."""
    from uuid import uuid4

    from prefect.server.events.jinja_filters import all_filters
    from prefect.server.utilities.user_templates import register_user_template_filters, render_user_template_sync

    register_user_template_filters(all_filters)
    event = {"resource": {"prefect.resource.name": "Shop", "fleet.dashboard": "dash.example.com"},
             "payload": {"run_id": "r1", "problems": ["operator -> ops@example.com: 550 no such mailbox"]}}
    for automation in wanted_automations(AutomationSettings(), uuid4()):
        for action in [action for action in automation.actions if isinstance(action, SendNotification)]:
            said = render_user_template_sync(action.body, {"event": event, "flow_run": None, "deployment": None})
            assert "None" not in said and not said.endswith(" "), said
