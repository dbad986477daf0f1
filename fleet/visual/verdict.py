"""A page's verdict after an update: its band from the visual diff, and the console errors and failed same-origin
requests that the shot after the update shows and the baselines did not."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fleet.model.summary import BAND_ORDER, Band
from fleet.visual.capture import Shot
from fleet.visual.diff import compare, load_mask
from fleet.visual.policy import Viewport, VisualPolicy


@dataclass(slots=True)
class PageVerdict:
    site: str
    page: str
    viewport: Viewport
    url: str
    band: Band | None  # None: no baseline to compare with (the error says why)
    score: float | None = None
    before: Path | None = None
    after: Path | None = None
    diff: Path | None = None
    new_console_errors: list[str] = field(default_factory=list)
    new_failed_requests: list[str] = field(default_factory=list)
    error: str | None = None


def _new(after: list[str], *before: list[str]) -> list[str]:
    seen = {line for lines in before for line in lines}
    return [line for line in dict.fromkeys(after) if line not in seen]


def judge_page(first: Shot, second: Shot, after: Shot, policy: VisualPolicy, reference: Shot | None = None,
               mask: Path | None = None) -> PageVerdict:
    """One page at one viewport, scored against `reference` (the shot after the step before; by default the
    first baseline), masking `mask` (a noise mask carried from earlier nights) or what moved between the two
    baselines. A page that shot fine before and not after is broken; one without a baseline and a mask (or a
    second baseline) cannot be judged."""
    reference = reference if reference is not None and reference.path is not None else first
    verdict = PageVerdict(first.site, first.page, first.viewport, first.url, None, before=reference.path,
                          after=after.path,
                          new_console_errors=_new(after.console_errors, first.console_errors, second.console_errors),
                          new_failed_requests=_new(after.failed_requests, first.failed_requests,
                                                   second.failed_requests))
    if first.path is None or (second.path is None and mask is None):
        verdict.error = f"no baseline: {first.error or second.error}"
        return verdict
    if after.path is None:
        verdict.band, verdict.error = Band.broken, f"no screenshot after the update: {after.error}"
        return verdict
    diff_path = after.path.with_name(after.path.name.replace(".png", ".diff.png"))
    result = compare(first.path, second.path, after.path, policy.pass_threshold, policy.fail_threshold, diff_path,
                     reference=reference.path, mask=load_mask(mask) if mask is not None else None)
    verdict.band, verdict.score, verdict.diff = result.band, result.score, diff_path
    return verdict


PageKey = tuple[str, str, Viewport]


def page_key(shot: Shot) -> PageKey:
    return shot.site, shot.page, shot.viewport


def judge_pages(first: list[Shot], second: list[Shot], after: list[Shot], policy: VisualPolicy,
                reference: list[Shot] | None = None, masks: dict[PageKey, Path] | None = None) -> list[PageVerdict]:
    """Match the sets of shots by (site, page, viewport) and judge each page found in the first."""
    seconds, afters = {page_key(s): s for s in second}, {page_key(s): s for s in after}
    references = {page_key(s): s for s in reference or []}
    masks = masks or {}
    verdicts = []
    for shot in first:
        key = page_key(shot)
        missing = Shot(shot.site, shot.page, shot.viewport, shot.url, error="not shot")
        verdicts.append(judge_page(shot, seconds.get(key, missing), afters.get(key, missing), policy,
                                   references.get(key), masks.get(key)))
    return verdicts


def worst_band(verdicts: list[PageVerdict]) -> Band | None:
    """A site's band: its worst page's (None when no page could be judged)."""
    bands = [v.band for v in verdicts if v.band is not None]
    return max(bands, key=BAND_ORDER.index) if bands else None
