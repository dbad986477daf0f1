"""Step 8 as tasks: the sites' health after the updates (`fleet.engine.health_checks`), their home pages before
(`fleet.engine.site_probe`), and the sites refused after an earlier failure revived (`fleet.engine.refused_sites`)."""

from __future__ import annotations

from prefect import task

from fleet.engine.health_checks import check_sites, count_open_incidents
from fleet.engine.refused_sites import revive_refused_sites
from fleet.engine.site_probe import probe_before_updates
from orchestration.call_gate import call_gate
from orchestration.retries import STEP_OPTIONS
from orchestration.run_handles import with_run_handles

revive_refused_sites_task = task(with_run_handles(revive_refused_sites, gate=call_gate), name="revive-refused-sites",
                                 **STEP_OPTIONS)
check_sites_task = task(with_run_handles(check_sites, gate=call_gate), name="check-sites", **STEP_OPTIONS)
probe_before_updates_task = task(probe_before_updates, name="probe-before-updates", **STEP_OPTIONS)
count_open_incidents_task = task(count_open_incidents, name="count-open-incidents", **STEP_OPTIONS)
