"""What a visitor sees of the sites the night updates (the policy's `visual:`).

Before a site's first update its pages are shot twice, `baseline_gap_seconds` apart: the second shot shows what
moves by itself. Less on later nights (`fleet.state.visual_baselines`): a site left healthy by an earlier night,
with nothing applied since, starts from that night's last shots and learned masks (no shot at all before its first
update), and a page with a learned mask is shot once, not twice. After each update step that touched it its pages
are shot again and judged (`fleet.visual.verdict`) against the shot after the step before, so that a step is never
blamed for an earlier step's change. One Chromium serves the whole night, a few pages at a time: it loads the
sites' own pages, never the dashboard's work. A site keeps its worst look of the night (the first step that showed
it, not the healthy shot after containment); the shots a containment takes to test a round are judged but never
replace it. The watch is an extra pair of eyes: whatever goes wrong in it (a sitemap that is not one, a browser
that will not start or crashes) is logged and leaves the night to its HTTP probes.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import httpx

from fleet.engine.site_probe import ProbeResult, probe_client, probe_url
from fleet.model.settings import PipelineSettings
from fleet.model.summary import BAND_ORDER, Band, PageLook, SiteLook, UpdateType
from fleet.model.vocabulary import count
from fleet.pacing.fan_out import fan_out
from fleet.rules.plan import DetectedUpdate, PlanItem, SiteRecord
from fleet.state.visual_baselines import KeptPage, ListedVersions, VisualBaselines
from fleet.visual.capture import CHROMIUM, PageCapture, Shot, chromium_path, shot_path
from fleet.visual.diff import learn_mask, load_mask, noise_mask, save_mask
from fleet.visual.pages import PageTarget, pages_to_check
from fleet.visual.policy import Viewport, VisualPolicy
from fleet.visual.verdict import PageKey, PageVerdict, judge_pages, page_key, worst_band

log = logging.getLogger("fleet.visual")
SHOTS_FOLDER = "visual"
VISUAL_STEPS = (UpdateType.plugin, UpdateType.theme, UpdateType.core)  # a translation pack changes only words


@dataclass
class Baseline:
    pages: list[PageTarget]
    first: list[Shot]
    second: list[Shot]  # empty for a page whose mask was carried from earlier nights
    reference: list[Shot]  # what the next step is scored against: the shots after the last step judged
    masks: dict[PageKey, Path]  # each page's noise mask (a block grid)


def listed_versions(updates: Iterable[DetectedUpdate]) -> dict[int, ListedVersions]:
    """Per site, the installed version of each item the dashboard lists with an update pending."""
    listed: dict[int, ListedVersions] = {}
    for update in updates:
        listed.setdefault(update.site_id, {})[update.type, update.slug] = update.from_version or ""
    return listed


class Capture(Protocol):
    """What shoots the pages: Chromium in this process (`PageCapture`), or task workers
    (`fleet.engine.worker_shots`)."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> Any: ...

    async def shoot_each(self, wanted: list[tuple[str, PageTarget, Viewport]], label: str) -> list[Shot]: ...

    async def shoot_sites(self, sites: dict[str, list[PageTarget]], viewports: list[Viewport],
                          label: str) -> list[Shot]: ...


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
                 verify_tls: bool = True, sitemap_concurrency: int = 8, capture: Capture | None = None) -> None:
        self.policy, self.run_dir, self.probe_template = policy, run_dir, probe_template
        self.capture: Capture = capture or PageCapture(run_dir / SHOTS_FOLDER, concurrency=concurrency,
                                                       verify_tls=verify_tls, full_page=policy.full_page,
                                                       screens=policy.screens)
        self.sitemap_concurrency = sitemap_concurrency
        self.baselines: dict[int, Baseline] = {}
        self.looks: dict[int, SiteLook] = {}
        self.off: str | None = None  # why the watch stopped looking tonight
        self.kept: VisualBaselines | None = None  # the nights' memory of the pages, once the dashboard is known
        self.listed: dict[int, ListedVersions] = {}  # tonight's listed versions, before any update
        self.settled: dict[int, ListedVersions] = {}  # the listed versions after a site's last step
        self.shots_taken = 0
        self._shots = 0

    @classmethod
    def for_night(cls, policy: VisualPolicy | None, run_dir: Path, settings: PipelineSettings,
                  capture: Capture | None = None) -> VisualWatch | None:
        """The night's watch, or None when the policy asks for none or, shooting in this process (no `capture` of
        the task workers), this machine has no Chromium (said once)."""
        if policy is None or not policy.enabled:
            return None
        if capture is None and chromium_path() is None:
            log.warning("visual checks are off tonight: the policy asks for them but there is no Chromium at %s "
                        "(install Debian's `chromium`)", CHROMIUM)
            return None
        return cls(policy, run_dir, concurrency=settings.visual_concurrency,
                   probe_template=settings.probe_url_template, verify_tls=settings.verify_tls,
                   sitemap_concurrency=settings.probe_concurrency, capture=capture)

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

    @property
    def extent(self) -> str:
        """How much of a page a shot holds: shots of another extent cannot be compared."""
        return "full" if self.policy.full_page else f"{self.policy.screens} screens"

    def home(self, site: SiteRecord) -> str:
        return probe_url(site.url, self.probe_template)

    def remember_in(self, kept: VisualBaselines, plan_items: Iterable[DetectedUpdate]) -> None:
        """Carry pages between nights in `kept`; `plan_items`: every item the dashboard lists tonight."""
        self.kept, self.listed = kept, listed_versions(plan_items)

    def lane_settled(self, site_ids: Iterable[int], after: list[DetectedUpdate]) -> None:
        """The versions listed after a lane's last step: what the next night compares its own list with."""
        listed = listed_versions(after)
        for site_id in site_ids:
            self.settled[site_id] = listed.get(site_id, {})

    async def take_baselines(self, sites: list[SiteRecord], http: httpx.AsyncClient) -> None:
        """The baselines of every page of the sites not watched yet (a site's baseline is its first): carried
        from an earlier night when nothing was applied since, else shot (once when the page's mask is known,
        twice when not). A site whose pages cannot be listed is not watched, and says why."""
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
        chosen = [(site, targets) for site, targets in zip(new, found, strict=True) if targets]
        carried: dict[PageKey, Shot] = {}
        masks: dict[PageKey, Path] = {}
        for site, targets in chosen:
            key = shot_key(site)
            kept = self.kept.kept(key, self.listed.get(site.id, {}), self.extent) if self.kept else {}
            for target in targets:
                for viewport in self.policy.viewports:
                    page = kept.get((target.name, viewport.value))
                    if page is None or page.url != target.url:
                        continue
                    masks[key, target.name, viewport] = page.mask
                    if page.shot is not None:
                        carried[key, target.name, viewport] = self._carry(key, target, viewport, page)
        wanted = [(shot_key(site), target, viewport) for site, targets in chosen for target in targets
                  for viewport in self.policy.viewports if (shot_key(site), target.name, viewport) not in carried]
        unmasked = [entry for entry in wanted if (entry[0], entry[1].name, entry[2]) not in masks]
        try:
            first = await self.capture.shoot_each(wanted, "before")
            second = []
            if unmasked:
                await asyncio.sleep(self.policy.baseline_gap_seconds)
                second = await self.capture.shoot_each(unmasked, "before-2")
        except Exception as error:  # noqa: BLE001 - a crashed browser
            self.stop(f"the baseline shots failed: {error}")
            return
        self.shots_taken += len(first) + len(second)
        shot_first = {page_key(shot): shot for shot in first}
        for shot in second:
            before = shot_first[page_key(shot)]
            if before.path is not None and shot.path is not None:
                masks[page_key(shot)] = save_mask(noise_mask(before.path, shot.path),
                                                  before.path.with_name(before.path.name.replace(".png", ".mask.png")))
        everything = shot_first | carried
        for site, targets in chosen:
            key = shot_key(site)
            mine = [everything[key, target.name, viewport] for viewport in self.policy.viewports
                    for target in targets]
            self.baselines[site.id] = Baseline(targets, mine, [s for s in second if s.site == key], mine,
                                               {k: path for k, path in masks.items() if k[0] == key})

    def _carry(self, key: str, target: PageTarget, viewport: Viewport, page: KeptPage) -> Shot:
        """An earlier night's last shot of the page, as tonight's first baseline (copied into the run)."""
        assert page.shot is not None
        path = shot_path(self.run_dir / SHOTS_FOLDER, key, target.name, viewport, "before")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page.shot, path)
        return Shot(key, target.name, viewport, target.url, path=path, status=200,
                    console_errors=list(page.console_errors), failed_requests=list(page.failed_requests))

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
        self.shots_taken += len(shots)
        failed = {shot.site for shot in shots if shot.path is None}
        if failed:
            again = await self.capture.shoot_sites({key: pages[key] for key in failed}, self.policy.viewports,
                                                   f"{name}-again")
            self.shots_taken += len(again)
            retaken = {page_key(shot): shot for shot in again}
            shots = [retaken.get(page_key(shot), shot) if shot.path is None else shot for shot in shots]
        looks, by_site = {}, {}
        for site in sites:
            key, baseline = shot_key(site), self.baselines[site.id]
            by_site[site.id] = [s for s in shots if s.site == key]
            verdicts = judge_pages(baseline.first, baseline.second, by_site[site.id], self.policy,
                                   reference=baseline.reference, masks=baseline.masks)
            looks[site.id] = SiteLook(site_id=site.id, site_url=site.url, site_name=site.name, client=site.client,
                                      step=step, band=worst_band(verdicts),
                                      pages=[page_look(v, self.run_dir) for v in verdicts])
        return looks, by_site

    def keep_for_next_night(self, broken: set[int]) -> int:
        """Each site that ended the night healthy (no break, HTTP or visual, and no look but healthy), and whose
        lane listed its versions after its last step: its last shots and its masks, grown with what moved between
        its healthy shots tonight, are the next night's baselines. Returns how many sites were kept."""
        if self.kept is None or self.off:
            return 0
        kept = 0
        for site_id, baseline in self.baselines.items():
            look = self.looks.get(site_id)
            if site_id in broken or site_id not in self.settled or (look is not None and look.band is not Band.healthy):
                continue
            references = {page_key(shot): shot for shot in baseline.reference}
            pages = []
            for first in baseline.first:
                key, last = page_key(first), references.get(page_key(first))
                mask = baseline.masks.get(key)
                if mask is None or first.path is None or last is None or last.path is None:
                    continue
                if last.path != first.path:
                    mask = save_mask(learn_mask(load_mask(mask), first.path, last.path),
                                     last.path.with_name(last.path.name.replace(".png", ".learned-mask.png")))
                pages.append(KeptPage(first.page, first.url, first.viewport.value, last.path, mask,
                                      tuple(last.console_errors), tuple(last.failed_requests)))
            if pages:
                self.kept.keep(baseline.first[0].site, self.settled[site_id], pages, self.extent)
                kept += 1
        return kept

    def finish(self, broken: set[int] | None = None) -> list[SiteLook]:
        """The night's looks, broken first, then for review, then the rest; the healthy sites' last shots kept
        for the next night (`broken`: the sites tonight broke). Only the images a report shows stay in the run
        (a night of 1,000 sites shoots tens of thousands of pages): every image of a page for review or broken,
        and one before/after pair per site (its first page at its first viewport)."""
        kept = self.keep_for_next_night(broken or set())
        if kept:
            log.info("the pages of %s are kept as the next night's baselines", count(kept, "healthy site"))
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


async def take_baselines(watch: VisualWatch, sites: list[SiteRecord], items: list[PlanItem],
                         before: dict[int, ProbeResult], settings: PipelineSettings) -> int:
    """Shoot the sites that passed the probe before and have a plugin, theme or core update planned (a site
    already down has no look to keep); returns how many sites the night watches so far."""
    changing = {item.site_id for item in items if item.type in VISUAL_STEPS}
    chosen = [site for site in sites if site.id in changing and site.id in before and before[site.id].ok]
    async with probe_client(settings) as http:  # the sitemaps: a visitor's plain GETs
        await watch.take_baselines(chosen, http)
    return len(watch.baselines)
