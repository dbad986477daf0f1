"""Background batch jobs, run as the real dashboard's WP-Cron runs them, on the scalable clock.

A batch-capable ability (or REST route) that targets more sites than `{ns}_abilities_batch_threshold`
(default 200; exactly 200 runs at once) queues a job instead of working at once. The first chunk runs 60 s
after queueing, then one chunk of `{ns}_abilities_cron_chunk_size` sites (default 20) every 30 s. One cron run
at a time works the chunks of all due jobs one after another, so jobs queued side by side share its pace.
Per-site failures are recorded and the job still completes; it fails only when a run finds it older than
the 4 h timeout. A job disappears 24 h after its last write. Jobs live in the fleet state (SQLite), so a
restarted emulator picks them up where they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from emulator.clock import Clock, iso_utc
from emulator.operations import KNOWN_OFFLINE, SiteOperations, SiteSuspended, SiteUnavailable
from emulator.records import ItemType, Site
from emulator.state import FleetState

if TYPE_CHECKING:
    from emulator.capacity import Capacity

log = logging.getLogger(__name__)

JOB_TYPES = ("sync", "update", "reconnect", "disconnect", "check", "suspend")
DEFAULT_THRESHOLD = 200
DEFAULT_CHUNK_SIZE = 20
FIRST_RUN_DELAY = 60.0
CHUNK_INTERVAL = 30.0
TIMEOUT = 4 * 3600.0
EXPIRY = 24 * 3600.0
# A job the fault layer slows: one site per run, 90 minutes apart, so it always meets the 4 h timeout.
SLOW_INTERVAL = 90 * 60.0
TIMEOUT_MESSAGE = "Job timed out after 4 hours."
TIMEOUT_JOB_MESSAGE = "Job timed out after 4 hours. Partial results may be available."
MIN_CHILD_VERSION = (4, 0, 0)
CHILD_OUTDATED = "Child plugin version 4.0.0 or higher required."

# Ability input type -> (stored item type, label used in per-site error messages), in the order jobs run them.
UPDATE_TYPES: dict[str, tuple[ItemType, str]] = {
    "core": ("wp", "core"),
    "plugins": ("plugin", "plugins"),
    "themes": ("theme", "themes"),
    "translations": ("translation", "translations"),
}

JobFaultPicker = Callable[[str], str | None]  # a job's identity (its type, sites and items) -> its fault


def child_outdated(site: Site) -> bool:
    """`check_child_version`: the abilities that sync, list or change what is on a child refuse it below 4.0.0.
    It reads the dashboard's sync record, not the child: after a sync the child did not answer (recorded "0") the
    site is refused until a reconnect that reaches the child records its version again."""
    parts: list[int] = []
    for piece in site.synced_child_version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (3 - len(parts))) < MIN_CHILD_VERSION


class BatchJobs:
    """Queue, run and report background jobs; every write goes through `FleetState.save_job`."""

    def __init__(self, state: FleetState, operations: SiteOperations, clock: Clock,
                 pick_fault: JobFaultPicker | None = None) -> None:
        self.state = state
        self.operations = operations
        self.clock = clock
        self.pick_fault = pick_fault
        self.on_change: Callable[[], None] | None = None  # wakes the runner: a job was queued or a run ended
        self._running: dict[str, asyncio.Task[None]] = {}
        # WP-Cron fires only when something visits the site (or a system cron calls wp-cron.php): while held, no
        # cron run starts and due jobs wait, as on a dashboard nobody visits; a test holds it to know where a job is
        self.held = False

    # ---- settings ------------------------------------------------------------------------------------------

    @property
    def threshold(self) -> int:
        value = self.state.option("abilities_batch_threshold")
        return int(value) if value is not None else DEFAULT_THRESHOLD

    @property
    def chunk_size(self) -> int:
        value = self.state.option("abilities_cron_chunk_size")
        return max(int(value), 1) if value is not None else DEFAULT_CHUNK_SIZE

    def should_queue(self, site_count: int) -> bool:
        """More than the threshold is queued; exactly the threshold runs at once."""
        return site_count > self.threshold

    # ---- queueing and reading ------------------------------------------------------------------------------

    def enqueue(self, job_type: str, site_ids: list[int], *, types: list[str] | None = None,
                specific_items: list[str] | None = None) -> dict[str, Any]:
        if job_type not in JOB_TYPES:
            raise ValueError(f"job type must be one of {', '.join(JOB_TYPES)}")
        now = self.clock.now()
        identity = f"{job_type}:{sorted(site_ids)}:{types or []}:{specific_items or []}"
        fault = self.pick_fault(identity) if self.pick_fault else None
        job: dict[str, Any] = {
            "job_id": f"{job_type}_{uuid.uuid4()}",
            "type": job_type,
            "sites": list(site_ids),
            "status": "queued",
            "created": now,
            "started": None,
            "completed": None,
            "succeeded": [],
            "errors": [],
            "processed": 0,
            "total": len(site_ids),
            "progress": 0,
            "types": types,
            "specific_items": specific_items,
            "job_timed_out": False,
            "fault": fault,
            # A job whose cron never fires has nothing scheduled: it stays queued until it expires.
            "next_run": None if fault == "stuck" else self.clock.deadline(now, FIRST_RUN_DELAY),
            "updated": now,
        }
        self.state.save_job(job["job_id"], job)
        if self.on_change is not None:
            self.on_change()
        return job

    def get(self, job_id: str) -> dict[str, Any] | None:
        """The job, or None when unknown or expired (an expired job is deleted, as its transient would be)."""
        job = self.state.jobs.get(job_id)
        if job is None:
            return None
        if self._expired(job, self.clock.now()):
            self.state.delete_job(job_id)
            return None
        return job

    @staticmethod
    def status_output(job: dict[str, Any]) -> dict[str, Any]:
        """What `get-batch-job-status-v1` answers."""
        output: dict[str, Any] = {
            "job_id": job["job_id"],
            "type": job["type"],
            "status": job["status"],
            "progress": int(job["progress"]),
            "processed": int(job["processed"]),
            "total": int(job["total"]),
            "succeeded": len(job["succeeded"]),
            "failed": len(job["errors"]),
            "started_at": iso_utc(job["started"]),
            "completed_at": iso_utc(job["completed"]),
            "errors": [dict(e) for e in job["errors"]],
            "job_timed_out": bool(job["job_timed_out"]),
        }
        if job["job_timed_out"]:
            output["job_error_code"] = "timeout"
            output["job_error_message"] = TIMEOUT_JOB_MESSAGE
        return output

    # ---- running -------------------------------------------------------------------------------------------

    def _expired(self, job: dict[str, Any], now: float) -> bool:
        return now > self.clock.deadline(job["updated"], EXPIRY)

    def due(self, now: float) -> list[dict[str, Any]]:
        return [j for j in self.state.jobs.values()
                if j["next_run"] is not None and j["next_run"] <= now and j["job_id"] not in self._running]

    def next_wake(self) -> float | None:
        times = [j["next_run"] for j in self.state.jobs.values()
                 if j["next_run"] is not None and j["job_id"] not in self._running]
        return min(times, default=None)

    def start_due(self) -> None:
        """Drop expired jobs and, unless a cron run is under way, start one for every job whose time has come.

        As wp-cron.php under its `doing_cron` lock: one cron request at a time, which runs the due events one
        after another; an event that falls due meanwhile waits for the next cron run.
        """
        now = self.clock.now()
        for job in list(self.state.jobs.values()):
            if self._expired(job, now) and job["job_id"] not in self._running:
                self.state.delete_job(job["job_id"])
        if self._running or self.held:
            return
        due = [job["job_id"] for job in sorted(self.due(now), key=lambda job: job["next_run"])]
        if not due:
            return
        task = asyncio.create_task(self._cron_run(due), name=f"cron run of {len(due)} batch job(s)")
        for job_id in due:
            self._running[job_id] = task
        task.add_done_callback(lambda _t: self._cron_ended())

    async def _cron_run(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            await self._guarded_run(job_id)

    def hold(self, held: bool) -> None:
        """Hold WP-Cron (no cron run starts; one under way ends its chunk) or let it fire again."""
        self.held = held
        if not held and self.on_change is not None:
            self.on_change()

    def _cron_ended(self) -> None:
        self._running.clear()
        if self.on_change is not None:
            self.on_change()

    async def cancel_running(self) -> None:
        tasks = list(set(self._running.values()))
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _guarded_run(self, job_id: str) -> None:
        """A run that fails (an emulator bug) is logged and retried one interval later, as a cron event."""
        try:
            await self.run_once(job_id)
        except Exception:
            log.exception("batch job %s: run failed, retrying in %.0f s", job_id, CHUNK_INTERVAL)
            job = self.state.jobs.get(job_id)
            if job is not None:
                job["next_run"] = self.clock.deadline(self.clock.now(), CHUNK_INTERVAL)
                self.state.save_job(job_id, job)

    async def run_once(self, job_id: str) -> None:
        """One cron run: time out, or move to processing and work one chunk, then reschedule or complete."""
        stored = self.state.jobs.get(job_id)
        now = self.clock.now()
        if stored is None or self._expired(stored, now) or stored["status"] in ("completed", "failed"):
            return
        job = copy.deepcopy(stored)  # readers see the job as last saved, as with the real transient
        if job["started"] is not None and now > self.clock.deadline(job["started"], TIMEOUT):
            job.update(status="failed", completed=now, job_timed_out=True, next_run=None, updated=now)
            job["errors"].append({"site_id": 0, "code": "timeout", "message": TIMEOUT_MESSAGE})
            self.state.save_job(job_id, job)
            return
        if job["status"] == "queued":
            job.update(status="processing", started=now)
        slow = job.get("fault") == "slow"
        done = set(job["succeeded"]) | {e["site_id"] for e in job["errors"]}
        chunk = [s for s in job["sites"] if s not in done][: 1 if slow else self.chunk_size]
        async with self.operations.capacity.serving():  # a cron run is one request on one worker
            outcomes = [await self._work_site(job, site_id) for site_id in chunk]
        for site_id, error in zip(chunk, outcomes, strict=True):
            if error is None:
                job["succeeded"].append(site_id)
            else:
                job["errors"].append({"site_id": site_id, **error})
        job["processed"] += len(chunk)
        job["progress"] = round(job["processed"] / job["total"] * 100) if job["total"] else 100
        now = self.clock.now()
        if job["processed"] >= job["total"]:
            job.update(status="completed", completed=now, progress=100, next_run=None)
        else:
            job["next_run"] = self.clock.deadline(now, SLOW_INTERVAL if slow else CHUNK_INTERVAL)
        job["updated"] = now
        self.state.save_job(job_id, job)

    async def _work_site(self, job: dict[str, Any], site_id: int) -> dict[str, str] | None:
        """One site's work; None on success, else the per-site error (codes without the namespace prefix)."""
        site = self.state.sites.get(site_id)
        if site is None:
            return {"code": "site_not_found", "message": f"Site {site_id} not found."}
        job_type = job["type"]
        ops = self.operations
        if job_type == "sync":
            if site.offline_check_result == -1:
                return {"code": "site_offline", "message": KNOWN_OFFLINE}
            if child_outdated(site):
                return {"code": "sync_failed", "message": CHILD_OUTDATED}
            result = await ops.sync(site)
            return None if result.ok else {"code": "sync_failed", "message": "Sync returned false."}
        if job_type == "update":
            return await self._update_site(job, site)
        if job_type == "check":
            checked = await ops.check(site)
            return None if checked.http_code else {"code": "check_failed", "message": "Site check failed."}
        if job_type == "reconnect":
            ok = await ops.reconnect(site)
            return None if ok else {"code": "reconnect_failed", "message": "Reconnect failed."}
        if job_type == "disconnect":
            await ops.disconnect(site)
            return None
        ops.suspend(site)
        return None

    async def _update_site(self, job: dict[str, Any], site: Site) -> dict[str, str] | None:
        """Core, then plugins and themes, then translations; ignore lists are not applied (as the real job)."""
        if child_outdated(site):
            return {"code": "update_failed", "message": CHILD_OUTDATED}
        requested = job.get("types") or list(UPDATE_TYPES)
        slugs = job.get("specific_items") or None
        failures: list[str] = []
        for type_name, (item_type, label) in UPDATE_TYPES.items():
            if type_name not in requested:
                continue
            try:
                results = await self.operations.update_items(
                    site, item_type, slugs if item_type in ("plugin", "theme") else None, respect_ignores=False
                )
            except (SiteUnavailable, SiteSuspended) as exc:
                message = exc.message if isinstance(exc, SiteUnavailable) else "Site is suspended."
                return {"code": "update_failed", "message": f"{label}: {message}"}
            failed = [f"{r.slug}: {r.error}" for r in results if r.outcome == "failed"]
            if failed:
                failures.append(f"{label}: " + ", ".join(failed))
        return {"code": "update_failed", "message": "; ".join(failures)} if failures else None


class JobRunner:
    """The dashboard's cron: wakes when a job is due (or queued) and starts its run. Start it in the app's
    lifespan (`runner.start()` on startup, `await runner.stop()` on shutdown); jobs left by a previous run of
    the emulator resume from their stored schedule."""

    IDLE_WAKE_SECONDS = 0.05

    def __init__(self, jobs: BatchJobs) -> None:
        self.jobs = jobs
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None

    def start(self) -> None:
        if self._task is not None and not self._task.done():
            return
        self._wake = asyncio.Event()
        self.jobs.on_change = self._wake.set
        self._task = asyncio.create_task(self._loop(), name="batch-job-runner")

    async def stop(self) -> None:
        self.jobs.on_change = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.jobs.cancel_running()

    async def _loop(self) -> None:
        assert self._wake is not None
        while True:
            self.jobs.start_due()
            wake_at = self.jobs.next_wake()
            wait = self.IDLE_WAKE_SECONDS
            if wake_at is not None:
                wait = min(max(wake_at - self.jobs.clock.now(), 0.0), wait)
            with contextlib.suppress(TimeoutError):  # asyncio.timeout, unlike 3.11's wait_for, never eats a cancel
                async with asyncio.timeout(wait):
                    await self._wake.wait()
            self._wake.clear()


@contextlib.asynccontextmanager
async def running_jobs(jobs: BatchJobs, capacity: Capacity) -> AsyncIterator[None]:
    """The job runner for the length of an app's lifespan (a Starlette `lifespan`: it yields no state)."""
    runner = JobRunner(jobs)
    runner.start()
    try:
        yield
    finally:
        await runner.stop()
        await capacity.stop()
