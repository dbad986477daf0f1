"""Fault injection: the dashboard misbehaving on purpose, deterministically under the seed.

A profile (`none`, `realistic`, `hostile`, or a YAML/JSON file) sets
- per request, on every dashboard route (never on `/__emulator__`): a latency drawn from a log-normal
  distribution, 5xx answers, 429 answers with `Retry-After`, and dropped connections (the request is
  processed, then the connection is cut before the answer is complete). A 5xx on a read comes before any work;
  on a write (POST, PUT, PATCH, DELETE) after it, as when PHP dies writing the answer or a proxy gives up while
  the dashboard goes on: the client cannot tell the two apart, so it must read the state back. The work then
  lands whatever call carried it, and two runs with one seed end alike however their calls were grouped;
- on the fleet: sites going offline and update items that fail (a clear error), fail silently (reported
  as success, version unmoved) or break the site when applied (a bad release: the update succeeds, then the
  site's pages are WordPress's critical-error page, HTTP 500; of plugins and themes, `load_time_share` fatal
  while WordPress loads, so the MainWP Child dies too and the dashboard reaches nothing), drawn once when the profile is
  applied, stored with the fleet (a restart with the same database and profile keeps them as they were) and
  undone when the profile is replaced;
- on the fleet too, bad releases that break a site's pages visually while they answer 200 (the stylesheet
  gone, a section blank: `emulator.visual_faults`), drawn from a stream of their own so adding them leaves
  every other draw as it was;
- on background jobs: a job whose cron never fires (it stays queued until it expires) and a job slowed until
  it hits the 4 h timeout.
Beside the profile, a test can lose the answers of named calls (`lose_answers`): the next requests whose path
names the call are worked to the end, then answered with the gateway's 504, as a real night meets one now and then.
Delays injected here are dashboard delays too: they are scaled by the clock like every other.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import re
from collections import Counter, deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emulator.visual_faults import VISUAL_ITEM_TYPES, mark_release

if TYPE_CHECKING:
    from emulator.clock import Clock
    from emulator.operations import FaultMode, SiteOperations
    from emulator.state import FleetState

EXEMPT_PREFIXES = ("/__emulator__", "/__sites__")  # ground truth, and the child sites' own pages
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class FaultProfile(BaseModel):
    """Rates are probabilities per request, per site, per update item or per job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "custom"
    latency_median_ms: float = Field(0.0, ge=0)
    latency_sigma: float = Field(0.0, ge=0, le=3, description="log-normal shape; 0 = always the median")
    latency_max_ms: float = Field(30_000.0, ge=0)
    error_rate: float = Field(0.0, ge=0, le=1, description="5xx answers (500, 502, 503, 504 in turn)")
    throttle_rate: float = Field(0.0, ge=0, le=1, description="429 answers with Retry-After")
    retry_after_seconds: int = Field(5, ge=0)
    drop_rate: float = Field(0.0, ge=0, le=1, description="connection cut after the request was processed")
    site_offline_rate: float = Field(0.0, ge=0, le=1)
    update_failure_rate: float = Field(0.0, ge=0, le=1)
    silent_failure_rate: float = Field(0.0, ge=0, le=1)
    site_breaking_rate: float = Field(0.0, ge=0, le=1, description="pending items whose update breaks the site")
    load_time_share: float = Field(
        0.0, ge=0, le=1, description="of the breaking plugin and theme releases, those that fatal while WordPress "
        "loads (the child dies too); the rest fatal in a template (the child still answers)")
    stuck_job_rate: float = Field(0.0, ge=0, le=1, description="queued jobs whose cron never fires")
    slow_job_rate: float = Field(0.0, ge=0, le=1, description="queued jobs slowed until the 4 h timeout")
    visual_break_rate: float = Field(0.0, ge=0, le=1, description="pending releases that break the page visually")
    visual_blank_share: float = Field(0.5, ge=0, le=1, description="of those, a section blank (else CSS gone)")

    @property
    def is_inert(self) -> bool:
        """Nothing to inject per request."""
        return self.latency_median_ms == 0 and self.error_rate + self.throttle_rate + self.drop_rate == 0

    def model_post_init(self, _context: object) -> None:
        if self.error_rate + self.throttle_rate + self.drop_rate > 1:
            raise ValueError("error_rate + throttle_rate + drop_rate must not exceed 1")
        if self.update_failure_rate + self.silent_failure_rate + self.site_breaking_rate > 1:
            raise ValueError("update_failure_rate + silent_failure_rate + site_breaking_rate must not exceed 1")
        if self.stuck_job_rate + self.slow_job_rate > 1:
            raise ValueError("stuck_job_rate + slow_job_rate must not exceed 1")


PROFILES: dict[str, FaultProfile] = {
    "none": FaultProfile(name="none"),
    "realistic": FaultProfile(
        name="realistic", latency_median_ms=120, latency_sigma=0.6, latency_max_ms=10_000,
        error_rate=0.01, throttle_rate=0.01, retry_after_seconds=2, drop_rate=0.002,
        site_offline_rate=0.02, update_failure_rate=0.03, silent_failure_rate=0.01, site_breaking_rate=0.01,
        load_time_share=0.6, stuck_job_rate=0.01, slow_job_rate=0.01, visual_break_rate=0.01,
    ),
    "hostile": FaultProfile(
        name="hostile", latency_median_ms=400, latency_sigma=1.0, latency_max_ms=20_000,
        error_rate=0.08, throttle_rate=0.08, retry_after_seconds=5, drop_rate=0.03,
        site_offline_rate=0.10, update_failure_rate=0.15, silent_failure_rate=0.05, site_breaking_rate=0.05,
        load_time_share=0.6, stuck_job_rate=0.25, slow_job_rate=0.25, visual_break_rate=0.04,
    ),
}


class FaultProfileError(ValueError):
    """A profile name or file that cannot be used; the message says why."""


def load_profile(spec: str | dict[str, Any]) -> FaultProfile:
    """A named profile, a path to a YAML/JSON file, or a mapping. Files and mappings may say
    `extends: realistic` and override single fields."""
    if isinstance(spec, str):
        if spec in PROFILES:
            return PROFILES[spec]
        path = Path(spec)
        if not path.is_file():
            raise FaultProfileError(f"unknown fault profile {spec!r}: use none, realistic, hostile or a file path")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise FaultProfileError(f"cannot read fault profile {path}: {exc}") from None
        if not isinstance(data, dict):
            raise FaultProfileError(f"fault profile {path} must be a mapping of settings")
        data.setdefault("name", path.stem)
        return load_profile(data)
    data = dict(spec)
    base_name = data.pop("extends", "none")
    if base_name not in PROFILES:
        raise FaultProfileError(f"extends must be one of {', '.join(PROFILES)}, not {base_name!r}")
    try:
        return FaultProfile.model_validate({**PROFILES[base_name].model_dump(), "name": "custom", **data})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'profile'}: {e['msg']}" for e in exc.errors())
        raise FaultProfileError(f"invalid fault profile: {problems}") from None


class FaultController:
    """The active profile, its seeded random streams and what it did (counters for ground truth and tests).

    The sites and items a profile touched are stored with the fleet, so a restart with the same database keeps
    them as they were instead of drawing again, and a later switch can still undo them."""

    ERROR_STATUSES = (500, 502, 503, 504)
    STORE_KIND = "fault_effects"

    def __init__(self, state: FleetState, operations: SiteOperations, seed: int, profile: FaultProfile) -> None:
        self.state = state
        self.operations = operations
        self.seed = seed
        self.profile = profile
        stored = state.records(self.STORE_KIND).get("applied")
        self._applied_offline: list[int] = list(stored["offline"]) if stored else []
        self._applied_items: list[tuple[int, str, str]] = [tuple(i) for i in stored["items"]] if stored else []
        self._applied_breaking: list[tuple[int, str, str]] = [tuple(i) for i in (stored or {}).get("breaking", [])]
        self._applied_visual: list[tuple[int, str, str]] = [tuple(i) for i in (stored or {}).get("visual", [])]
        self.lost_answers: dict[str, int] = {}
        self._reset_streams()
        if stored is None or stored["profile"] != profile.model_dump():
            self.revert_fleet_effects()
            self.apply_fleet_effects()
        self._count_fleet_effects()

    def lose_answers(self, call: str, times: int) -> None:
        """The next `times` requests whose path names `call` (an ability such as `check-sites-v1`, or a REST path
        such as `/sites/3/sync`) do their work, then the gateway's 504 answers them."""
        self.lost_answers[call] = times

    def answer_lost(self, path: str) -> bool:
        """Whether this request's answer is one of those to lose (counted off)."""
        for call, left in self.lost_answers.items():
            if left > 0 and (path.endswith(call) or f"/{call}/" in path):
                self.lost_answers[call] = left - 1
                self.counts["answers_lost"] += 1
                return True
        return False

    def _reset_streams(self) -> None:
        self._seen: Counter[str] = Counter()  # how often each request or job identity came, for its own draw
        self.counts: Counter[str] = Counter()
        self.latencies_ms: deque[float] = deque(maxlen=100_000)  # the latest samples, for the percentiles

    def switch(self, profile: FaultProfile) -> None:
        """Replace the profile at run time: undo the fleet effects of the old one, apply the new one."""
        self.revert_fleet_effects()
        self.profile = profile
        self._reset_streams()
        self.apply_fleet_effects()
        self._count_fleet_effects()

    # ---- per request ---------------------------------------------------------------------------------------

    def _draws(self, kind: str, identity: str) -> random.Random:
        """The random stream of one request or job: seeded by what it is (method, path, query and body; a job's
        type and sites) and how many times the same one came before, never by when it came among the others. Two
        runs with the same seed then meet the same faults, however their concurrent requests interleave."""
        self._seen[identity] += 1
        return random.Random(f"{self.seed}:{kind}:{self.profile.name}:{identity}#{self._seen[identity]}")

    def decide_request(self, identity: str) -> tuple[float, str, int]:
        """(latency in nominal seconds, outcome ok|error|throttle|drop, status for errors) of the request
        `identity` names (`request_identity`)."""
        p = self.profile
        draws = self._draws("request", identity)
        latency_ms = 0.0
        if p.latency_median_ms > 0:
            latency_ms = min(p.latency_median_ms * math.exp(p.latency_sigma * draws.gauss(0, 1)), p.latency_max_ms)
        draw = draws.random()
        self.counts["requests"] += 1
        self.latencies_ms.append(latency_ms)
        if draw < p.error_rate:
            self.counts["errors"] += 1
            return latency_ms / 1000, "error", draws.choice(self.ERROR_STATUSES)
        if draw < p.error_rate + p.throttle_rate:
            self.counts["throttled"] += 1
            return latency_ms / 1000, "throttle", 429
        if draw < p.error_rate + p.throttle_rate + p.drop_rate:
            self.counts["dropped"] += 1
            return latency_ms / 1000, "drop", 0
        return latency_ms / 1000, "ok", 200

    # ---- per job -------------------------------------------------------------------------------------------

    def pick_job_fault(self, identity: str) -> str | None:
        """Whether the job `identity` names (its type and sites) gets stuck or runs slow."""
        draw = self._draws("job", identity).random()
        if draw < self.profile.stuck_job_rate:
            self.counts["stuck_jobs"] += 1
            return "stuck"
        if draw < self.profile.stuck_job_rate + self.profile.slow_job_rate:
            self.counts["slow_jobs"] += 1
            return "slow"
        return None

    # ---- on the fleet --------------------------------------------------------------------------------------

    def apply_fleet_effects(self) -> None:
        """Take a seeded sample of sites offline and mark a seeded sample of pending update items to fail or to
        break their site (one draw per item, so adding the breaking rate leaves the failing sample as it was)."""
        p = self.profile
        rng = random.Random(f"{self.seed}:fleet:{p.name}")
        if p.site_offline_rate > 0:
            for site in self.state.sites.values():
                if rng.random() < p.site_offline_rate and site.reachable:
                    self.operations.set_reachable(site, False)
                    self._applied_offline.append(site.id)
        kind = random.Random(f"{self.seed}:load-time:{p.name}")  # a stream of its own: the other draws stay put
        if p.update_failure_rate + p.silent_failure_rate + p.site_breaking_rate > 0:
            for site in self.state.sites.values():
                for update in self.state.pending_updates(site, respect_ignores=False):
                    draw = rng.random()
                    if f"{update.type}:{update.slug}" in site.fail_items:
                        continue
                    if draw < p.update_failure_rate:
                        mode: FaultMode = "fail"
                    elif draw < p.update_failure_rate + p.silent_failure_rate:
                        mode = "silent"
                    elif draw < p.update_failure_rate + p.silent_failure_rate + p.site_breaking_rate:
                        at_load = update.type in ("plugin", "theme") and kind.random() < p.load_time_share
                        mode = "load" if at_load else "break"
                    else:
                        continue
                    self.operations.set_item_fault(site, update.type, update.slug, mode)
                    applied = self._applied_breaking if mode in ("break", "load") else self._applied_items
                    applied.append((site.id, update.type, update.slug))
        self._apply_visual_faults()
        self._save_fleet_effects()

    def _apply_visual_faults(self) -> None:
        """Mark a seeded sample of pending releases (core, plugins, themes) to break their site's page visually."""
        p = self.profile
        if p.visual_break_rate == 0:
            return
        rng = random.Random(f"{self.seed}:visual:{p.name}")
        for site in self.state.sites.values():
            for update in self.state.pending_updates(site, respect_ignores=False):
                hit, blank = rng.random() < p.visual_break_rate, rng.random() < p.visual_blank_share
                key = f"{update.type}:{update.slug}"
                if not hit or update.type not in VISUAL_ITEM_TYPES or key in site.visual_faults:
                    continue
                if mark_release(self.state, site, update.type, update.slug, "blank" if blank else "css"):
                    self._applied_visual.append((site.id, update.type, update.slug))

    def revert_fleet_effects(self) -> None:
        for site_id in self._applied_offline:
            site = self.state.sites.get(site_id)
            if site is not None:
                self.operations.set_reachable(site, True)
        for site_id, item_type, slug in self._applied_items + self._applied_breaking:
            site = self.state.sites.get(site_id)
            if site is not None:
                self.operations.set_item_fault(site, item_type, slug, None)  # type: ignore[arg-type]
                if f"{item_type}:{slug}" in (site.broken_by, site.fatal_by):
                    self.operations.set_front_end_broken(site, False)
        for site_id, item_type, slug in self._applied_visual:
            site = self.state.sites.get(site_id)
            if site is not None:
                mark_release(self.state, site, item_type, slug, None)  # type: ignore[arg-type]
        self._applied_offline, self._applied_items, self._applied_breaking = [], [], []
        self._applied_visual = []
        self._save_fleet_effects()

    def _save_fleet_effects(self) -> None:
        self.state.save_record(self.STORE_KIND, "applied", {
            "profile": self.profile.model_dump(),
            "offline": self._applied_offline,
            "items": [list(item) for item in self._applied_items],
            "breaking": [list(item) for item in self._applied_breaking],
            "visual": [list(item) for item in self._applied_visual],
        })

    def _count_fleet_effects(self) -> None:
        self.counts["sites_offline"] = len(self._applied_offline)
        self.counts["items_failing"] = len(self._applied_items)
        self.counts["items_breaking"] = len(self._applied_breaking)
        self.counts["items_breaking_at_load"] = sum(
            1 for site_id, item_type, slug in self._applied_breaking
            if self.state.sites[site_id].fail_items.get(f"{item_type}:{slug}") == "load"
            or self.state.sites[site_id].fatal_by == f"{item_type}:{slug}")
        self.counts["items_breaking_visually"] = len(self._applied_visual)

    def snapshot(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ms)

        def percentile(q: float) -> float:
            return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 1) if ordered else 0.0

        return {
            "profile": self.profile.model_dump(),
            "counts": dict(self.counts),
            "latency_ms": {"p50": percentile(0.5), "p95": percentile(0.95), "p99": percentile(0.99)},
        }


# ---- HTTP -----------------------------------------------------------------------------------------------------


class DroppedConnection(httpx.RemoteProtocolError):
    """Raised after a started answer to cut the connection: uvicorn closes the socket mid-response, and an
    in-process client (`httpx.ASGITransport`) sees the same `httpx.RemoteProtocolError` a socket client would."""


_THROTTLE_BODY = {"code": "rest_too_many_requests", "message": "Too many requests. Please try again later.",
                  "data": {"status": 429}}
_ERROR_BODIES = {
    500: ("application/json; charset=UTF-8", json.dumps(
        {"code": "internal_server_error", "message": "There has been a critical error on this website.",
         "data": {"status": 500}})),
    502: ("text/html", "<html><head><title>502 Bad Gateway</title></head><body>502 Bad Gateway</body></html>"),
    503: ("text/html", "<html><head><title>503 Service Unavailable</title></head>"
                       "<body>503 Service Temporarily Unavailable</body></html>"),
    504: ("text/html", "<html><head><title>504 Gateway Time-out</title></head>"
                       "<body>504 Gateway Time-out</body></html>"),
}


_GENERATED_IDS = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


async def request_identity(scope: Scope, receive: Receive) -> tuple[Receive, str]:
    """What a request is, for its fault draws: method, path, query and a digest of its body (read here, then
    handed on unchanged). Ids the emulator generated (a job's UUID) are left out, as they differ from run to run."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    body = b"".join(message.get("body", b"") for message in messages)
    what = f"{scope['method']} {scope['path']}?{scope.get('query_string', b'').decode('latin-1')}".encode()
    identity = hashlib.blake2b(_GENERATED_IDS.sub(b"-", what + b"\0" + body), digest_size=12).hexdigest()
    replay = deque(messages)

    async def replayed() -> Message:
        return replay.popleft() if replay else await receive()

    return replayed, identity


class FaultMiddleware:
    """ASGI middleware applying the emulator's fault profile to every dashboard request."""

    def __init__(self, app: ASGIApp, faults: FaultController, clock: Clock) -> None:
        self.app = app
        self.faults = faults
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
            return
        controller = self.faults
        if controller.answer_lost(scope["path"]):
            await self._lose_after_processing(scope, receive, send)
            return
        if controller.profile.is_inert:
            await self.app(scope, receive, send)
            return
        receive, identity = await request_identity(scope, receive)
        latency, outcome, status = controller.decide_request(identity)
        if latency > 0:
            await self.clock.sleep(latency)
        if outcome == "throttle":
            response: Response = JSONResponse(
                _THROTTLE_BODY, 429, headers={"Retry-After": str(controller.profile.retry_after_seconds)})
            await response(scope, receive, send)
            return
        if outcome == "error":
            if scope["method"] in WRITE_METHODS:  # what the client cannot tell apart: the work may have run
                await self._lose_after_processing(scope, receive, send, status)
                return
            media_type, body = _ERROR_BODIES[status]
            await Response(body, status, media_type=media_type)(scope, receive, send)
            return
        if outcome == "drop":
            await self._drop_after_processing(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _lose_after_processing(self, scope: Scope, receive: Receive, send: Send, status: int = 504) -> None:
        """The work is done to the end; the caller gets `status` (the gateway's 504) instead of its answer."""

        async def swallow(message: Message) -> None:
            return None

        await self.app(scope, receive, swallow)
        media_type, body = _ERROR_BODIES[status]
        await Response(body, status, media_type=media_type)(scope, receive, send)

    async def _drop_after_processing(self, scope: Scope, receive: Receive, send: Send) -> None:
        started: list[Message] = []

        async def hold(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.append(message)

        await self.app(scope, receive, hold)
        if started:  # the headers go out, the body never does
            await send(started[0])
        raise DroppedConnection("connection dropped by the fault profile")


class _QuietDrops(logging.Filter):
    """Keep the server's log free of tracebacks for connections the profile cut on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], DroppedConnection))


def install_faults(app: Starlette) -> None:
    """Put the fault middleware in front of an app from `create_app`, and keep the cut connections out of the log."""
    emulator = app.state.emulator
    app.add_middleware(FaultMiddleware, faults=emulator.faults, clock=emulator.clock)
    quiet = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietDrops) for f in quiet.filters):
        quiet.addFilter(_QuietDrops())
