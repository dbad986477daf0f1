"""Page shots on Prefect task workers, for a night with more pages to shoot than one machine's Chromium can take.

With `FLEET_VISUAL_TASK_WORKERS=true` the night's watch shoots nothing itself: each batch of shots (a site's pages
at its viewports, `SHOTS_PER_RUN` at most) becomes a background task run (`shoot_pages.delay(...)`, submitted by
`tasks.page_checks`) that any `fleet screenshots serve` process serves, on this machine or another. A worker keeps
one Chromium open, shoots the batch and returns the images as the task's result; Prefect keeps the arguments and
results in result storage that the night and every worker reach (the local folder under PREFECT_HOME by default,
when they share a machine; any Prefect filesystem block named by `PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK`
and `PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK` across machines). The night writes them into its run directory and
judges them there, as it judges its own. Without the setting (the default) the night shoots in its own process and
needs no worker.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from fleet.engine.visual_watch import SHOTS_FOLDER
from fleet.model.settings import PipelineSettings
from fleet.pacing.fan_out import chunked
from fleet.rules.policy import Policy
from fleet.visual.capture import PageCapture, Shot, shot_path
from fleet.visual.pages import PageTarget
from fleet.visual.policy import Viewport

SHOTS_PER_RUN = 10  # the default pages (home and 4 sitemap pages) of one site at two viewports: one task run


class PageRequest(BaseModel):
    site: str
    page: str
    url: str
    viewport: Viewport


class TakenShot(BaseModel):
    """A shot as a worker returns it: what the page showed, and the image itself."""

    request: PageRequest
    image: bytes | None = None
    status: int | None = None
    console_errors: list[str] = []
    failed_requests: list[str] = []
    error: str | None = None


class CaptureOptions(BaseModel):
    """How the night's policy and settings ask pages to be shot."""

    model_config = ConfigDict(frozen=True)
    screens: int = 2
    full_page: bool = False
    verify_tls: bool = True
    concurrency: int = 3


class ShotsRun(Protocol):
    """A batch's background task run, as the night waits for its shots."""

    async def result_async(self, timeout: float | None = None) -> list[TakenShot]: ...


SubmitShots = Callable[[list[PageRequest], str, CaptureOptions], ShotsRun]


_browsers: dict[CaptureOptions, PageCapture] = {}
_starting = asyncio.Lock()
_scratch = Path(tempfile.mkdtemp(prefix="fleet-shots-"))


async def _browser(options: CaptureOptions) -> PageCapture:
    """The worker's Chromium for these options, started on first use and kept for the worker's life."""
    async with _starting:
        if options not in _browsers:
            capture = PageCapture(_scratch, concurrency=options.concurrency, verify_tls=options.verify_tls,
                                  full_page=options.full_page, screens=options.screens)
            _browsers[options] = await capture.__aenter__()
        return _browsers[options]


async def shoot_batch(requests: list[PageRequest], label: str, options: CaptureOptions) -> list[TakenShot]:
    """Shoot a batch of pages in this worker's Chromium; the images travel back in the answer (the task's result)."""
    capture = await _browser(options)
    shots = await capture.shoot_each([(r.site, PageTarget(r.page, r.url), r.viewport) for r in requests], label)
    taken = []
    for request, shot in zip(requests, shots, strict=True):
        image = shot.path.read_bytes() if shot.path is not None else None
        if shot.path is not None:
            shot.path.unlink(missing_ok=True)
        taken.append(TakenShot(request=request, image=image, status=shot.status, console_errors=shot.console_errors,
                               failed_requests=shot.failed_requests, error=shot.error))
    return taken


class WorkerCapture:
    """The watch's capture when task workers shoot: the same `shoot_each` and `shoot_sites` as `PageCapture`, each
    batch a background task run (`submit`, from `tasks.page_checks`); a batch no worker finished within `timeout_s`
    fails the shots (the watch then stops looking, and the night goes on with its HTTP probes)."""

    def __init__(self, run_dir: Path, options: CaptureOptions, timeout_s: float, submit: SubmitShots) -> None:
        self.run_dir, self.options, self.timeout_s, self.submit = run_dir, options, timeout_s, submit

    @classmethod
    def for_night(cls, policy: Policy, run_dir: Path, settings: PipelineSettings,
                  submit: SubmitShots) -> WorkerCapture | None:
        """The night's capture on task workers, when the settings ask for them and the policy for visual checks."""
        if not settings.visual_task_workers or policy.visual is None:
            return None
        options = CaptureOptions(screens=policy.visual.screens, full_page=policy.visual.full_page,
                                 verify_tls=settings.verify_tls, concurrency=settings.visual_concurrency)
        return cls(run_dir / SHOTS_FOLDER, options, settings.visual_worker_timeout_seconds, submit)

    async def __aenter__(self) -> WorkerCapture:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None

    async def shoot_sites(self, sites: dict[str, list[PageTarget]], viewports: list[Viewport],
                          label: str) -> list[Shot]:
        return await self.shoot_each([(site, page, viewport) for site, pages in sites.items()
                                      for viewport in viewports for page in pages], label)

    async def shoot_each(self, wanted: list[tuple[str, PageTarget, Viewport]], label: str) -> list[Shot]:
        requests = [PageRequest(site=site, page=page.name, url=page.url, viewport=viewport)
                    for site, page, viewport in wanted]
        futures = [self.submit(batch, label, self.options) for batch in chunked(requests, SHOTS_PER_RUN)]
        batches = await asyncio.gather(*(future.result_async(timeout=self.timeout_s) for future in futures))
        return [self._written(taken, label) for batch in batches for taken in batch]

    def _written(self, taken: TakenShot, label: str) -> Shot:
        request = taken.request
        shot = Shot(request.site, request.page, request.viewport, request.url, status=taken.status,
                    console_errors=taken.console_errors, failed_requests=taken.failed_requests, error=taken.error)
        if taken.image is not None:
            shot.path = shot_path(self.run_dir, request.site, request.page, request.viewport, label)
            shot.path.parent.mkdir(parents=True, exist_ok=True)
            shot.path.write_bytes(taken.image)
        return shot
