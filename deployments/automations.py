"""The Prefect automations the service needs, created or updated in code each time `fleet serve` starts (by name:
never twice, and one turned off in the settings is deleted). Prefect's server evaluates them, so they also speak
when the night itself cannot: a night not finished some hours after its scheduled time (a proactive trigger: a
hung night, or a service that is down), reports not delivered, and a kill switch that pauses the work when more
than N sites break within the window. Their notifications go to FLEET_NOTIFY_BLOCK. docs/operations.md says more.
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.events.actions import ActionTypes, DoNothing, PauseDeployment, SendNotification
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture
from prefect.settings import PREFECT_UI_URL
from pydantic import Field, ValidationError, field_validator

from dashboard.home import SettingsError
from fleet.model.events import REPORTS_NOT_DELIVERED, SITE_BROKEN
from fleet.model.vocabulary import count
from reporting.alert import notification_block
from reporting.settings import NotifySettings

NIGHT_NOT_FINISHED = "fleet: night not finished"
REPORTS_UNDELIVERED = "fleet: reports not delivered"
KILL_SWITCH = "fleet: kill switch"
NAMES = (NIGHT_NOT_FINISHED, REPORTS_UNDELIVERED, KILL_SWITCH)
NIGHTLY_FLOW = "nightly-maintenance"
# a run's terminal states (Prefect's state event names, the state's name: TimedOut is a Failed type)
FINISHED = {f"prefect.flow-run.{state}" for state in ("Completed", "Failed", "Crashed", "Cancelled", "TimedOut")}
# a night's clock starts at its scheduled time: Late (not started 15 s after it), or Pending (picked up)
STARTED = {"prefect.flow-run.Late", "prefect.flow-run.Pending"}
SHORTEST_PROACTIVE = timedelta(seconds=10)  # Prefect's floor for a proactive trigger's window
TAGS = ["fleet-maintenance"]


class AutomationSettings(NotifySettings):
    """Which automations `fleet serve` keeps, and their thresholds."""

    automations: bool = Field(True, description="Keep the automations at all; false deletes fleet serve's own.")
    night_deadline_hours: float = Field(
        6.0, ge=0, description="Notify when a nightly run has not finished this many hours after its scheduled time "
        "(0: no such automation).")
    undelivered_alert: bool = Field(True, description="Notify when a night's reports were not delivered.")
    kill_switch_sites: int = Field(
        5, ge=0, description="Pause the deployment whose run broke the sites when more than this many sites break "
        "within FLEET_KILL_SWITCH_MINUTES (0: no kill switch).")
    kill_switch_minutes: float = Field(60.0, gt=0, description="The kill switch's window.")

    @field_validator("night_deadline_hours")
    @classmethod
    def _long_enough(cls, value: float) -> float:
        if value and timedelta(hours=value) < SHORTEST_PROACTIVE:
            raise ValueError("must be 0 (off) or at least 10 seconds (0.0028 hours): Prefect's shortest window for "
                             "a trigger on something that did not happen")
        return value

    @property
    def deadline(self) -> timedelta:
        return timedelta(hours=self.night_deadline_hours)

    @property
    def window(self) -> timedelta:
        return timedelta(minutes=self.kill_switch_minutes)


def said(duration: timedelta) -> str:
    """A duration in the unit an operator reads it in: 6 h, 90 min, 15 s."""
    seconds = duration.total_seconds()
    if seconds >= 3600 and seconds % 1800 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


# the flow run's page, in the one form every message uses; nothing (never "None") when the event names no flow run
# or the server knows no UI address
RUN_LINK = "{% set link = flow_run|ui_url if flow_run else '' %}{% if link %} {{ link }}{% endif %}"


def notify(block_id: UUID | None, subject: str, body: str) -> list[ActionTypes]:
    """Send to FLEET_NOTIFY_BLOCK; without one, the automation still fires (seen in the Prefect UI's event feed)."""
    if block_id is None:
        return [DoNothing()]
    return [SendNotification(block_document_id=block_id, subject=subject, body=body)]


def night_not_finished(settings: AutomationSettings, block_id: UUID | None) -> AutomationCore:
    """A nightly run not in a final state `deadline` after it was due: each run is watched from its Late event (not
    started at its time: the service is down) or its Pending one (picked up), whichever comes first."""
    within = said(settings.deadline)
    return AutomationCore(
        name=NIGHT_NOT_FINISHED, tags=TAGS,
        description=f"A nightly-maintenance run has not finished {within} after its scheduled time "
                    "(FLEET_NIGHT_DEADLINE_HOURS).",
        trigger=EventTrigger(
            posture=Posture.Proactive, after=STARTED, expect=FINISHED, threshold=1, within=settings.deadline,
            for_each={"prefect.resource.id"}, match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related={"prefect.resource.role": "flow", "prefect.resource.name": NIGHTLY_FLOW}),
        actions=notify(
            block_id, f"fleet-maintenance: night {{{{ flow_run.name }}}} not finished {within} after its time",
            f"fleet-maintenance: the nightly run {{{{ flow_run.name }}}} has not finished {within} after its "
            "scheduled time ({{ flow_run.expected_start_time }}); it is {{ flow_run.state.name }}. A hung night, "
            "or no fleet serve to run it." + RUN_LINK))


def reports_not_delivered(block_id: UUID | None) -> AutomationCore:
    return AutomationCore(
        name=REPORTS_UNDELIVERED, tags=TAGS,
        description="A night's reports did not reach every recipient (FLEET_UNDELIVERED_ALERT).",
        trigger=EventTrigger(expect={REPORTS_NOT_DELIVERED}, match={"prefect.resource.id": "fleet.dashboard.*"},
                             threshold=1, within=timedelta(0)),
        actions=notify(
            block_id, "fleet-maintenance: reports of run {{ event.payload.run_id }} not delivered",
            "fleet-maintenance: reports of run {{ event.payload.run_id }} (dashboard "
            "{{ event.resource['prefect.resource.name'] }}) not delivered: "
            "{{ event.payload.problems | join('; ') }}" + RUN_LINK))


def kill_switch(settings: AutomationSettings, block_id: UUID | None, ui_url: str | None = None) -> AutomationCore:
    """More than N `fleet.site.broken` within the window, across every dashboard: the deployment whose run broke
    the last one is paused (no new run of it starts; the night under way finishes with its own containment).
    `ui_url`: the Prefect UI, for the deployment's page in the notification."""
    more_than, within = settings.kill_switch_sites, said(settings.window)
    page = f" ({ui_url.rstrip('/')}/deployments/deployment/{{{{ deployment.id }}}})" if ui_url else ""
    sites = count(more_than, "site")
    body = (f"fleet-maintenance kill switch: more than {sites} broke within {within}, the last "
            "{{ event.resource['prefect.resource.name'] }} on {{ event.resource['fleet.dashboard'] }} "
            "(run {{ event.payload.run_id }}). {% if deployment %}The deployment {{ deployment.name }} is paused: "
            "no run of it starts until it is resumed.{% else %}No deployment ran it: nothing was paused.{% endif %} "
            "To resume once the cause is found: restart fleet serve (it switches its deployments on again), or "
            f"switch the deployment on in the Prefect UI{{% if deployment %}}{page}{{% endif %}}." + RUN_LINK)
    return AutomationCore(
        name=KILL_SWITCH, tags=TAGS,
        description=f"More than {sites} broke within {within} (FLEET_KILL_SWITCH_SITES, "
                    "FLEET_KILL_SWITCH_MINUTES): pause the deployment that broke them.",
        trigger=EventTrigger(expect={SITE_BROKEN}, match={"prefect.resource.id": "fleet.site.*"},
                             threshold=more_than + 1, within=settings.window),
        actions=[*notify(block_id, f"fleet-maintenance: kill switch: more than {sites} broke within "
                                   f"{within}", body),
                 PauseDeployment(source="inferred")])


def wanted_automations(settings: AutomationSettings, block_id: UUID | None, ui_url: str | None = None
                       ) -> list[AutomationCore]:
    """The automations these settings ask for (none with FLEET_AUTOMATIONS=false); `ui_url`: the Prefect UI's."""
    if not settings.automations:
        return []
    wanted = []
    if settings.night_deadline_hours:
        wanted.append(night_not_finished(settings, block_id))
    if settings.undelivered_alert:
        wanted.append(reports_not_delivered(block_id))
    if settings.kill_switch_sites:
        wanted.append(kill_switch(settings, block_id, ui_url))
    return wanted


async def ensure_automations(settings: AutomationSettings | None = None) -> list[str]:
    """Create or update the wanted automations by name, delete fleet's own that are no longer wanted (or found
    twice); returns one line per automation, for `fleet serve` to print. A FLEET_NOTIFY_BLOCK that names no saved
    notification block, or a bad setting, is the one-line `SettingsError` naming it."""
    try:
        settings = settings or AutomationSettings()
    except ValidationError as error:
        raise SettingsError.of(error) from None
    block_id = None
    if settings.notify_block:
        block_id = (await notification_block(settings.notify_block))._block_document_id
    wanted = {automation.name: automation
              for automation in wanted_automations(settings, block_id, PREFECT_UI_URL.value())}
    lines = []
    async with get_client() as client:
        for name in NAMES:
            found = await client.read_automations_by_name(name)
            for extra in found[1:] if name in wanted else found:
                await client.delete_automation(extra.id)
            if name not in wanted:
                continue
            if found:
                # Prefect 3.8.8's client sends only the fields set by hand (exclude_unset): the trigger's type and
                # posture would be missing (422); a copy validated from its whole dump has every field set (but the
                # owner, which the update does not take)
                whole = AutomationCore.model_validate(wanted[name].model_dump(mode="json", exclude={"owner_resource"}))
                await client.update_automation(found[0].id, whole)
                verb = "updated"
            else:
                await client.create_automation(wanted[name])
                verb = "created"
            to = settings.notify_block or "no FLEET_NOTIFY_BLOCK: the Prefect UI's event feed only"
            lines.append(f"automation {name!r} {verb}: {wanted[name].description} Notifies: {to}")
    return lines
