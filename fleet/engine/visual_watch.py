"""What a visitor sees of the sites the night updates (the policy's `visual:`).

Before a site's first update its pages are shot twice, `baseline_gap_seconds` apart: the second shot shows what
moves by itself. After each update step that touched it they are shot again and judged (`fleet.visual.verdict`)
against the shot after the step before, so that a step is never blamed for an earlier step's change. One Chromium
serves the whole night, a few pages at a time: it loads the sites' own pages, never the dashboard's work. A site
keeps its worst look of the night (the first step that showed it, not the healthy shot after containment); the
shots a containment takes to test a round are judged but never replace it. The watch is an extra pair of eyes:
whatever goes wrong in it (a sitemap that is not one, a browser that will not start or crashes) is logged and
leaves the night to its HTTP probes.
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
from fleet.visual.verdict import PageVerdict, judge_pages, page_key, worst_band

log = logging.getLogger("fleet.visual")
SHOTS_FOLDER = "visual"
VISUAL_STEPS = (UpdateType.plugin, UpdateType.theme, UpdateType.core)  # a translation pack changes only words


@dataclass
class Baseline:
    pages: list[PageTarget]
    first: list[Shot]
    second: list[Shot]
    reference: list[Shot]  # what the next step is scored against: the shots after the last step judged


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


def worse(new: Band | None, old: Band | None) -> bool:
    """Whether a new look replaces the one kept: a judged look beats none, a worse band a better one (an equal
    one does not: the step that first showed it stays, with the images the gate's reason names)."""
    if new is None:
        return False
    return old is None or BAND_ORDER.index(new) > BAND_ORDER.index(old)


class VisualWatch:
    """`async with VisualWatch(policy, run_dir, ...) as watch`: baselines, then a look after each step."""

    def __init__(self, policy: VisualPolicy, run_dir: Path, *, concurrency: int, probe_template: str | None,
                 verify_tls: bool = True, sitemap_concurrency: int = 8) -> None:
        self.policy, self.run_dir, self.probe_template = policy, run_dir, probe_template
        self.capture = PageCapture(run_dir / SHOTS_FOLDER, concurrency=concurrency, verify_tls=verify_tls)
        self.sitemap_concurrency = sitemap_concurrency
        self.baselines: dict[int, Baseline] = {}
        self.looks: dict[int, SiteLook] = {}
        self.off: str | None = None  # why the watch stopped looking tonight
        self._shots = 0

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
                   probe_template=settings.probe_url_template, verify_tls=settings.verify_tls,
                   sitemap_concurrency=settings.probe_concurrency)

    async def __aenter__(self) -> VisualWatch:
        try:
            await self.capture.__aenter__()
        except Exception as error:  # noqa: BLE001 - a browser that will not start must not stop the night
            self.stop(f"Chromium did not start: {error}")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.capture.__aexit__(exc_type, exc, tb)

    def stop(self, why: str) -> None:
        """No more shots tonight (said once): the HTTP probes go on alone."""
        if self.off is None:
            log.warning("visual checks are off for the rest of the night: %s", why)
        self.off = why

    def home(self, site: SiteRecord) -> str:
        return probe_url(site.url, self.probe_template)

    async def take_baselines(self, sites: list[SiteRecord], http: httpx.AsyncClient) -> None:
        """Both baseline shots of every page of the sites not watched yet (a site's baseline is its first). A site
        whose pages cannot be listed is not watched, and says why."""
        new = [site for site in sites if site.id not in self.baselines]
        if not new or self.off:
            return

        async def pages_of(site: SiteRecord) -> list[PageTarget] | None:
            try:
                return await pages_to_check(http, self.home(site), self.policy)
            except Exception as error:  # noqa: BLE001 - the sitemap is the site's own text
                log.warning("site %s is not watched tonight: its pages could not be listed: %s", site.name, error)
                return None

        found = await fan_out(new, pages_of, self.sitemap_concurrency)
        pages = {shot_key(site): targets for site, targets in zip(new, found, strict=True) if targets}
        try:
            first = await self.capture.shoot_sites(pages, self.policy.viewports, "before")
            await asyncio.sleep(self.policy.baseline_gap_seconds)
            second = await self.capture.shoot_sites(pages, self.policy.viewports, "before-2")
        except Exception as error:  # noqa: BLE001 - a crashed browser
            self.stop(f"the baseline shots failed: {error}")
            return
        for site in new:
            key = shot_key(site)
            if key in pages:
                mine = [s for s in first if s.site == key]
                self.baselines[site.id] = Baseline(pages[key], mine, [s for s in second if s.site == key], mine)

    async def look_after(self, sites: list[SiteRecord], step: UpdateType) -> dict[int, SiteLook]:
        """The watched sites' pages shot after `step` and judged against the shots after the step before; each
        site's worst look of the night is kept, and what the step left becomes the next step's reference."""
        watched = [site for site in sites if site.id in self.baselines]
        try:
            looks, shots = await self._judge(watched, step, "after")
        except Exception as error:  # noqa: BLE001 - a crashed browser, a disk full
            self.stop(f"the shots after the {step.value} updates failed: {error}")
            return {}
        for site in watched if looks else []:
            look = looks[site.id]
            if worse(look.band, self.looks[site.id].band if site.id in self.looks else None):
                self.looks[site.id] = look
            if look.band is not Band.broken:  # a broken site gets nothing more: its reference no longer matters
                self._move_reference(self.baselines[site.id], shots[site.id])
        return looks

    async def still_broken(self, site: SiteRecord, step: UpdateType) -> bool:
        """A containment's round: does the site still look broken? (Judged, never kept as its look; when the
        shots fail, it does: the bisection then switches every suspect back on.)"""
        try:
            looks, _ = await self._judge([site], step, "round")
        except Exception as error:  # noqa: BLE001
            log.warning("site %s: a containment round's shots failed: %s", site.name, error)
            return True
        return site.id not in looks or looks[site.id].band is Band.broken

    @staticmethod
    def _move_reference(baseline: Baseline, shots: list[Shot]) -> None:
        taken = {page_key(shot): shot for shot in shots if shot.path is not None}
        baseline.reference = [taken.get(page_key(shot), shot) for shot in baseline.reference]

    async def _judge(self, sites: list[SiteRecord], step: UpdateType, label: str
                     ) -> tuple[dict[int, SiteLook], dict[int, list[Shot]]]:
        """Shoot and judge; a page whose shot failed is shot once more before it counts as broken (a page that
        loaded for both baselines may time out once on a busy host)."""
        if self.off or not sites:
            return {}, {}
        self._shots += 1
        name = f"{label}-{step.value}-{self._shots}"
        pages = {shot_key(site): self.baselines[site.id].pages for site in sites}
        shots = await self.capture.shoot_sites(pages, self.policy.viewports, name)
        failed = {shot.site for shot in shots if shot.path is None}
        if failed:
            again = await self.capture.shoot_sites({key: pages[key] for key in failed}, self.policy.viewports,
                                                   f"{name}-again")
            retaken = {page_key(shot): shot for shot in again}
            shots = [retaken.get(page_key(shot), shot) if shot.path is None else shot for shot in shots]
        looks, by_site = {}, {}
        for site in sites:
            key, baseline = shot_key(site), self.baselines[site.id]
            by_site[site.id] = [s for s in shots if s.site == key]
            verdicts = judge_pages(baseline.first, baseline.second, by_site[site.id], self.policy,
                                   reference=baseline.reference)
            looks[site.id] = SiteLook(site_id=site.id, site_url=site.url, site_name=site.name, client=site.client,
                                      step=step, band=worst_band(verdicts),
                                      pages=[page_look(v, self.run_dir) for v in verdicts])
        return looks, by_site

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
