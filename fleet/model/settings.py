"""Pipeline settings (environment `FLEET_*` or a `.env` file: `dashboard/home.py`): where reports and the nights'
memory go, and how hard the dashboard is pushed.

The dashboard's connection settings (URL, credentials) belong to the client (`dashboard/`); these only shape
the pipeline's work.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PrivateAttr, field_validator, model_validator

from dashboard.home import FleetSettings, fleet_home
from fleet.pacing.call_sizing import CallSizer

STATE_FILE = "fleet-state.sqlite"
DASHBOARD_JOB_TIMEOUT_SECONDS = 4 * 3600  # the dashboard fails a batch job after 4 hours


class PipelineSettings(FleetSettings):
    report_dir: Path = Field(default_factory=lambda: fleet_home() / "reports",
                             description="Directory of one sub-directory per run (default: FLEET_HOME/reports).")
    state_db: Path | None = Field(
        None, description="SQLite file of the home's own memory: the vulnerability feed's copy. Each dashboard's "
        "memory (holds, incidents, first-seen dates, the journal, the night lock) lives beside it, in "
        "dashboards/<its address>/ (default: FLEET_HOME/fleet-state.sqlite, wherever the command was started)."
    )
    policy_file: Path | None = Field(None, description="Policy file (YAML or TOML); none means apply everything.")
    concurrency: int = Field(
        8, ge=1, le=256,
        description="Your dashboard's PHP workers: requests in flight at once never exceed it (a request waiting "
        "in the dashboard's queue also runs toward its gateway's timeout).",
    )
    call_budget_seconds: float = Field(
        20, ge=0,
        description="No call may need longer than this: calls are sized from the time per site (or item) the "
        "dashboard's answers showed, well under a 60 s gateway. 0 = no sizing (calls of FLEET_SITES_PER_CALL).",
    )
    time_scale: float = Field(
        1.0, gt=0,
        description="The dashboard's clock against the wall: 1 for a real dashboard, an emulator's --time-scale "
        "(its credentials file says it). The call budget, the quiet wait and the job deadline are in the "
        "dashboard's seconds and are multiplied by it, so no other time setting needs scaling by hand.",
    )
    quiet_wait_seconds: float = Field(
        900, gt=0,
        description="After a write whose answer was lost (504, timeout), how long to wait at most for its sites "
        "to be quiet before re-reading them.",
    )
    fresh_sync_hours: float = Field(
        0, ge=0,
        description="Skip the pre-sync of a site the dashboard synced within this many hours (0 = always sync).",
    )
    check_all_sites: bool = Field(False, description="Check every site with planned work, not only those updated.")
    progress_seconds: float = Field(30, gt=0, description="Longest silence in the log while the run waits.")
    chunk_size: int = Field(500, ge=1, description="Sites handled by one Prefect task run.")
    batch_threshold: int = Field(
        200, ge=1, description="The dashboard's background threshold: calls over more sites queue a batch job."
    )
    sites_per_call: int = Field(
        200,
        ge=1,
        description="Largest number of sites in one call. Calls are sized by FLEET_CALL_BUDGET_SECONDS and never "
        "pass the dashboard's threshold; with the budget at 0, calls carry this many sites, and above the "
        "threshold the dashboard queues a batch job (20 sites per 30 s), which the sensor waits for.",
    )
    job_deadline_seconds: float = Field(
        3.5 * 3600, gt=0, description="How long the sensor waits on one batch job (under the dashboard's 4 h)."
    )
    stall_after_seconds: float = Field(
        600, gt=0, description="A job whose progress does not move for this long is declared stalled."
    )
    job_poll_seconds: float = Field(5.0, gt=0, description="First interval between job status polls (it grows).")
    probe_sites: bool = Field(True, description="Probe each updated site's home page after the updates.")
    probe_timeout_seconds: float = Field(20, gt=0, description="Timeout of the home-page probe of each site.")
    probe_concurrency: int = Field(32, ge=1, le=1024, description="Home-page probes in flight at once.")
    probe_url_template: str | None = Field(
        None,
        description="Probe each site at this address instead of its own URL; `{host}` is the site's domain "
        "(e.g. an emulator's http://127.0.0.1:8080/__sites__/{host}/).",
    )
    verify_tls: bool = Field(True, description="Verify TLS certificates when probing sites.")
    visual_concurrency: int = Field(
        3, ge=1, le=32, description="Browser pages the visual checks (the policy's `visual:`) load at once, in one "
        "Chromium: a site's pages, never the dashboard's work.")
    visual_task_workers: bool = Field(
        False, description="Leave the visual checks' screenshots to Prefect task workers (`fleet screenshots "
        "serve`, on this machine or others) instead of this process's Chromium.")
    visual_worker_timeout_seconds: float = Field(
        900, gt=0, description="How long a batch of screenshots may wait for a task worker before the visual checks "
        "stop for the night (the HTTP probes go on).")
    concurrency_limit: str | None = Field(
        None, description="Name of a Prefect global concurrency limit every dashboard write call occupies."
    )
    night_lock_wait_seconds: float = Field(
        3600, ge=0, description="How long a night waits for its dashboard's night lock while another live run holds "
        "it, before it gives up without starting (exit 10, and alerted as a night that could not start). A lock "
        "whose holder's process is gone is free at once.")
    task_retries: int = Field(2, ge=0, description="Coarse retries of a failed step (the client retries requests).")
    retry_delay_seconds: float = Field(10, ge=0)

    @field_validator("probe_url_template")
    @classmethod
    def _template_names_the_host(cls, value: str | None) -> str | None:
        if value and "{host}" not in value:
            raise ValueError("must contain {host}, e.g. http://127.0.0.1:8080/__sites__/{host}/")
        return value or None

    @model_validator(mode="after")
    def _deadline_under_dashboard_timeout(self) -> PipelineSettings:
        if self.job_deadline_seconds >= DASHBOARD_JOB_TIMEOUT_SECONDS:
            raise ValueError("FLEET_JOB_DEADLINE_SECONDS must stay under the dashboard's 4 h job timeout (14400)")
        return self

    def call_sizer(self) -> CallSizer:
        """One sizer per run: every step's calls learn from the answers of the steps before.

        A per-call cap raised above the dashboard's threshold asks for update calls that queue batch jobs:
        those carry that many sites, unsized, as every call does with the budget at 0.
        """
        return CallSizer(self.call_budget, self.sites_per_call, self.batch_threshold)

    @property
    def call_budget(self) -> float:
        """`call_budget_seconds` on the wall clock the answers' `elapsed` is measured in."""
        return self.call_budget_seconds * self.time_scale

    @property
    def quiet_wait(self) -> float:
        return self.quiet_wait_seconds * self.time_scale

    @property
    def job_deadline(self) -> float:
        return self.job_deadline_seconds * self.time_scale

    _memory: Path | None = PrivateAttr(None)  # the database of the dashboard this run serves: `with_memory`

    @property
    def home_state_path(self) -> Path:
        """The home's own database: the vulnerability feed's copy, about WordPress rather than a dashboard; each
        dashboard's memory sits beside it (`fleet.state.dashboard_memory`)."""
        return self.state_db or fleet_home() / STATE_FILE

    @property
    def state_path(self) -> Path:
        """The memory of the dashboard this run serves; a run that has not opened one has none to read."""
        if self._memory is None:
            raise RuntimeError("no dashboard's memory is open: settings.with_memory(...) comes first")
        return self._memory

    def with_memory(self, path: Path) -> PipelineSettings:
        """These settings, for a run whose dashboard's memory is `path`."""
        settings = self.model_copy()
        settings._memory = path
        return settings
