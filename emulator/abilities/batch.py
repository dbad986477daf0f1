"""The `{ns}-batch` ability: the status of a background job (the only place job status exists)."""

from __future__ import annotations

from typing import Any

from emulator.abilities.context import AbilityContext
from emulator.jobs import BatchJobs

JOB_NOT_FOUND = "Batch job not found. Job may have expired (jobs are kept for 24 hours)."


async def get_batch_job_status(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    job = ctx.jobs.get(args["job_id"])
    if job is None:
        raise ctx.fail("job_not_found", JOB_NOT_FOUND, 404)
    return BatchJobs.status_output(job)


HANDLERS = {"get-batch-job-status-v1": get_batch_job_status}
