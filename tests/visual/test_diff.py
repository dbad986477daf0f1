"""The diff on images made here: the noise mask, the bands, pages of different heights, the diff image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fleet.visual.diff import Band, band_of, compare, widen_to_blocks

Box = tuple[int, int, int, int, int]


def page(path: Path, height: int = 400, width: int = 200, boxes: tuple[Box, ...] = ()) -> Path:
    """A white page with filled boxes (top, left, bottom, right, grey level)."""
    pixels = np.full((height, width, 3), 255, dtype=np.uint8)
    for top, left, bottom, right, level in boxes:
        pixels[top:bottom, left:right] = level
    Image.fromarray(pixels, "RGB").save(path)
    return path


def test_what_moved_between_the_baselines_is_masked_and_the_rest_is_scored(tmp_path: Path) -> None:
    slide_a = page(tmp_path / "a.png", boxes=((40, 40, 100, 160, 30),))
    slide_b = page(tmp_path / "b.png", boxes=((40, 40, 100, 160, 200),))
    same_but_moved = page(tmp_path / "c.png", boxes=((40, 40, 100, 160, 120),))
    changed_text = page(tmp_path / "d.png", boxes=((40, 40, 100, 160, 120), (300, 0, 304, 200, 0)))
    calm = compare(slide_a, slide_b, same_but_moved, 0.005, 0.05, tmp_path / "calm.diff.png")
    unmasked = compare(slide_a, slide_a, same_but_moved, 0.005, 0.05)
    review = compare(slide_a, slide_b, changed_text, 0.005, 0.05)
    assert calm.band is Band.healthy and calm.score == 0 and calm.masked_pixels > 60 * 120
    assert unmasked.band is Band.broken  # without the second baseline the carousel would be a false alarm
    assert review.band is Band.review and review.changed_pixels == 4 * 200
    with Image.open(tmp_path / "calm.diff.png") as image:
        assert image.size == (200, 400)


def test_a_shorter_page_counts_its_missing_rows_as_changed(tmp_path: Path) -> None:
    before = page(tmp_path / "before.png", height=400)
    shorter = page(tmp_path / "after.png", height=300)
    result = compare(before, before, shorter, 0.005, 0.05, tmp_path / "diff.png")
    assert result.score == pytest.approx(100 / 400) and result.band is Band.broken
    assert result.size_before == (200, 400) and result.size_after == (200, 300)
    with Image.open(tmp_path / "diff.png") as image:
        assert image.size == (200, 400) and image.getpixel((10, 390)) == (230, 20, 20)


def test_a_noisy_pixel_masks_its_block_and_the_blocks_around_it() -> None:
    pixels = np.zeros((64, 64), dtype=bool)
    pixels[20, 20] = True
    mask = widen_to_blocks(pixels, block=16, spread=1)
    assert mask[0:48, 0:48].all() and not mask[48:, :].any() and not mask[:, 48:].any()


@pytest.mark.parametrize(("score", "band"), [(0.0, Band.healthy), (0.0049, Band.healthy), (0.005, Band.review),
                                             (0.05, Band.review), (0.0501, Band.broken)])
def test_bands(score: float, band: Band) -> None:
    assert band_of(score, 0.005, 0.05) is band


def test_a_later_step_is_scored_against_the_shot_after_the_step_before(tmp_path: Path) -> None:
    night_before = page(tmp_path / "before.png")
    again = page(tmp_path / "before-2.png")
    after_plugins = page(tmp_path / "plugins.png", boxes=((0, 0, 12, 200, 90),))  # a notice bar: 3% of the page
    after_theme = page(tmp_path / "theme.png", boxes=((0, 0, 12, 200, 90), (300, 0, 312, 200, 60)))
    against_the_night = compare(night_before, again, after_theme, 0.005, 0.05)
    against_the_step = compare(night_before, again, after_theme, 0.005, 0.05, reference=after_plugins)
    assert against_the_night.score == pytest.approx(0.06) and against_the_night.band is Band.broken
    assert against_the_step.score == pytest.approx(0.03) and against_the_step.band is Band.review
