"""Page shots on Prefect task workers, for a night with more pages to shoot than one machine's Chromium can take
(`fleet.engine.worker_shots`): each batch a background run of `shoot_pages`, served by `fleet screenshots serve`."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from fleet.engine.worker_shots import CaptureOptions, PageRequest, ShotsRun, TakenShot, WorkerCapture, shoot_batch
from fleet.model.settings import PipelineSettings
from fleet.rules.policy import Policy
from orchestration.background_runs import detached


@task(name="shoot-pages", persist_result=True, retries=1, retry_delay_seconds=5)
async def shoot_pages(requests: list[PageRequest], label: str, options: CaptureOptions) -> list[TakenShot]:
    """Shoot a batch of pages in this worker's Chromium; the images travel back in the task's result."""
    return await shoot_batch(requests, label, options)


def submit_shots(requests: list[PageRequest], label: str, options: CaptureOptions) -> ShotsRun:
    """One batch as a background run of `shoot_pages`, outside the calling runs' contexts."""
    return detached(shoot_pages.delay, requests, label, options)


def worker_capture(policy: Policy, run_dir: Path, settings: PipelineSettings) -> WorkerCapture | None:
    """The night's capture on task workers, when the settings ask for them and the policy for visual checks."""
    return WorkerCapture.for_night(policy, run_dir, settings, submit_shots)
