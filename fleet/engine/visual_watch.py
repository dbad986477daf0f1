"""What a visitor sees of the sites the night updates (the policy's `visual:`).

Before a site's first update its pages are shot twice, `baseline_gap_seconds` apart: the second shot shows what
moves by itself. After each update step that touched it they are shot again and judged (`fleet.visual.verdict`).
One Chromium serves the whole night, a few pages at a time: it loads the sites' own pages, never the dashboard's
work. A site keeps its worst look of the night (the step that broke it, not the healthy shot after containment);
the shots a containment takes to test a round are judged but never replace it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import httpx

from fleet.engine.site_probe import probe_url
from fleet.model.settings import PipelineSettings
from fleet.model.summary import BAND_ORDER, Band, PageLook, SiteLook, UpdateType
from fleet.pacing.fan_out import fan_out
from fleet.rules.plan import SiteRecord
from fleet.visual.capture import CHROMIUM, PageCapture, Shot, chromium_path
from fleet.visual.pages import PageTarget, pages_to_check
from fleet.visual.policy import VisualPolicy
from fleet.visual.verdict import PageVerdict, judge_pages, worst_band

log = logging.getLogger("fleet.visual")
SHOTS_FOLDER = "visual"
VISUAL_STEPS = (UpdateType.plugin, UpdateType.theme, UpdateType.core)  # a translation pack changes only words


@dataclass
class Baseline:
    pages: list[PageTarget]
    first: list[Shot]
    second: list[Shot]


def shot_key(site: SiteRecord) -> str:
    """A site's folder under `visual/`: its id keeps two sites of one domain apart."""
    return f"{site.id}-{site.domain}"


def page_look(verdict: PageVerdict, run_dir: Path) -> PageLook:
    def relative(path: Path | None) -> str | None:
        return None if path is None else path.relative_to(run_dir).as_posix()

    return PageLook(page=verdict.page, viewport=verdict.viewport.value, url=verdict.url, band=verdict.band,
                    score=verdict.score, before=relative(verdict.before), after=relative(verdict.after),
                    diff=relative(verdict.diff), new_console_errors=verdict.new_console_errors,
                    new_failed_requests=verdict.new_failed_requests, error=verdict.error)


def worse_or_same(new: Band | None, old: Band | None) -> bool:
    """Whether a new look replaces the one kept: a judged look beats none, a worse or equal band the older."""
    if old is None:
        return True
    return new is not None and BAND_ORDER.index(new) >= BAND_ORDER.index(old)


class VisualWatch:
    """`async with VisualWatch(policy, run_dir, ...) as watch`: baselines, then a look after each step."""

    def __init__(self, policy: VisualPolicy, run_dir: Path, *, concurrency: int, probe_template: str | None,
                 verify_tls: bool = True) -> None:
        self.policy, self.run_dir, self.probe_template = policy, run_dir, probe_template
        self.capture = PageCapture(run_dir / SHOTS_FOLDER, concurrency=concurrency, verify_tls=verify_tls)
        self.baselines: dict[int, Baseline] = {}
        self.looks: dict[int, SiteLook] = {}
        self._rounds = 0

    @classmethod
    def for_night(cls, policy: VisualPolicy | None, run_dir: Path, settings: PipelineSettings) -> VisualWatch | None:
        """The night's watch, or None when the policy asks for none or this machine has no Chromium (said once)."""
        if policy is None or not policy.enabled:
            return None
        if chromium_path() is None:
            log.warning("visual checks are off tonight: the policy asks for them but there is no Chromium at %s "
                        "(install Debian's `chromium`)", CHROMIUM)
            return None
        return cls(policy, run_dir, concurrency=settings.visual_concurrency,
                   probe_template=settings.probe_url_template, verify_tls=settings.verify_tls)

    async def __aenter__(self) -> VisualWatch:
        await self.capture.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.capture.__aexit__(exc_type, exc, tb)

    def home(self, site: SiteRecord) -> str:
        return probe_url(site.url, self.probe_template)

    async def take_baselines(self, sites: list[SiteRecord], http: httpx.AsyncClient) -> None:
        """Both baseline shots of every page of the sites not watched yet (a site's baseline is its first)."""
        new = [site for site in sites if site.id not in self.baselines]
        if not new:
            return
        targets = await fan_out(new, lambda site: pages_to_check(http, self.home(site), self.policy), 8)
        pages = {shot_key(site): found for site, found in zip(new, targets, strict=True)}
        first = await self.capture.shoot_sites(pages, self.policy.viewports, "before")
        await asyncio.sleep(self.policy.baseline_gap_seconds)
        second = await self.capture.shoot_sites(pages, self.policy.viewports, "before-2")
        for site in new:
            key = shot_key(site)
            self.baselines[site.id] = Baseline(pages[key], [s for s in first if s.site == key],
                                               [s for s in second if s.site == key])

    async def look_after(self, sites: list[SiteRecord], step: UpdateType) -> dict[int, SiteLook]:
        """The watched sites' pages shot after `step` and judged; each site's worst look of the night is kept."""
        watched = [site for site in sites if site.id in self.baselines]
        looks = await self._judge(watched, step, f"after-{step.value}")
        for site_id, look in looks.items():
            if worse_or_same(look.band, self.looks[site_id].band if site_id in self.looks else None):
                self.looks[site_id] = look
        return looks

    async def still_broken(self, site: SiteRecord, step: UpdateType) -> bool:
        """A containment's round: does the site still look broken? (Judged, never kept as its look.)"""
        self._rounds += 1
        looks = await self._judge([site], step, f"round-{self._rounds}")
        return looks[site.id].band is Band.broken

    async def _judge(self, sites: list[SiteRecord], step: UpdateType, label: str) -> dict[int, SiteLook]:
        pages = {shot_key(site): self.baselines[site.id].pages for site in sites}
        shots = await self.capture.shoot_sites(pages, self.policy.viewports, label)
        looks = {}
        for site in sites:
            key, baseline = shot_key(site), self.baselines[site.id]
            verdicts = judge_pages(baseline.first, baseline.second, [s for s in shots if s.site == key], self.policy)
            looks[site.id] = SiteLook(site_id=site.id, site_url=site.url, site_name=site.name, client=site.client,
                                      step=step, band=worst_band(verdicts),
                                      pages=[page_look(v, self.run_dir) for v in verdicts])
        return looks

    def finish(self) -> list[SiteLook]:
        """The night's looks, broken first, then for review, then the rest. Only the images a report shows stay
        on disk (a night of 1,000 sites shoots tens of thousands of full pages): every image of a page for review
        or broken, and one before/after pair per site (its first page at its first viewport)."""
        keep: set[str] = set()
        for look in self.looks.values():
            for number, page in enumerate(look.pages):
                shown = page.band in (Band.review, Band.broken)
                paths = (page.before, page.after, page.diff) if shown else (page.before, page.after)
                if shown or number == 0:
                    keep.update(path for path in paths if path)
                if not shown:
                    page.diff = None
                    if number:
                        page.before = page.after = None
        for path in (self.run_dir / SHOTS_FOLDER).rglob("*.png"):
            if path.relative_to(self.run_dir).as_posix() not in keep:
                path.unlink(missing_ok=True)

        def order(look: SiteLook) -> tuple[int, int]:
            return -(BAND_ORDER.index(look.band) if look.band is not None else -1), look.site_id

        return sorted(self.looks.values(), key=order)
