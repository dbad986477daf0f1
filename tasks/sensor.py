"""The sensor as a task: wait on a dashboard batch job (`fleet.engine.batch_jobs`), its progress an artifact."""

from __future__ import annotations

from prefect import task

from orchestration.progress import watch_batch_job
from orchestration.retries import STEP_OPTIONS

wait_for_batch_job_task = task(watch_batch_job, name="wait-for-batch-job", task_run_name="wait-for-{kind}-job-{job_id}",
                               **STEP_OPTIONS)
