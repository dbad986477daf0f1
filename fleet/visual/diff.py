"""The visual diff: how much of a page changed after an update, leaving out what changes by itself.

Two baseline shots taken a few seconds apart show the pixels that move on their own (a carousel, a clock, an
ad); those pixels, widened to the blocks of the grid they fall in and one block around, are the noise mask. The
mask is kept as its grid of blocks (a 1-bit PNG of a few hundred bytes), so that it can be carried from night
to night and grow with what moved between healthy shots (`learn_mask`) instead of being shot again.
The score is the share of pixels outside the mask that differ between the first baseline and the shot after
the update. Pages of different heights are compared on the taller one's area: rows that exist in one shot
only count as changed. The bands: below `pass` healthy, from `pass` to `fail` review, above `fail` broken.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from fleet.model.summary import Band

CHANNEL_TOLERANCE = 24  # of 255: anti-aliasing and colour rounding between two renders are not a change
MASK_BLOCK = 16  # pixels: the grid the noise mask is widened to
MASK_SPREAD = 1  # blocks around each noisy block


@dataclass(frozen=True, slots=True)
class VisualDiff:
    score: float  # share of changed pixels outside the noise mask
    band: Band
    changed_pixels: int
    compared_pixels: int  # pixels outside the mask
    masked_pixels: int
    size_before: tuple[int, int]  # (width, height)
    size_after: tuple[int, int]
    diff_path: Path | None = None


def load_rgb(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def _padded(image: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The image on a (height, width) canvas, and where on it the image has pixels."""
    canvas = np.zeros((height, width, 3), dtype=np.uint8)
    present = np.zeros((height, width), dtype=bool)
    canvas[: image.shape[0], : image.shape[1]] = image
    present[: image.shape[0], : image.shape[1]] = True
    return canvas, present


def changed_pixels(first: np.ndarray, second: np.ndarray, height: int, width: int) -> np.ndarray:
    """Boolean (height, width): pixels that differ beyond the tolerance, or exist in one image only."""
    a, in_a = _padded(first, height, width)
    b, in_b = _padded(second, height, width)
    differs = (np.abs(a.astype(np.int16) - b.astype(np.int16)) > CHANNEL_TOLERANCE).any(axis=2)
    return (differs & in_a & in_b) | (in_a != in_b)


def noise_blocks(pixels: np.ndarray, block: int = MASK_BLOCK, spread: int = MASK_SPREAD) -> np.ndarray:
    """The grid of blocks (rows, cols) holding a marked pixel, with `spread` blocks around each."""
    height, width = pixels.shape
    rows, cols = -(-height // block), -(-width // block)
    grid = np.zeros((rows * block, cols * block), dtype=bool)
    grid[:height, :width] = pixels
    blocks = grid.reshape(rows, block, cols, block).any(axis=(1, 3))
    padded = np.pad(blocks, spread)
    widened = np.zeros_like(blocks)
    for dy in range(2 * spread + 1):
        for dx in range(2 * spread + 1):
            widened |= padded[dy : dy + rows, dx : dx + cols]
    return widened


def blocks_to_pixels(blocks: np.ndarray, height: int, width: int, block: int = MASK_BLOCK) -> np.ndarray:
    """A block grid as a (height, width) pixel mask; blocks beyond the grid are not masked."""
    canvas = np.zeros((-(-height // block), -(-width // block)), dtype=bool)
    rows, cols = min(canvas.shape[0], blocks.shape[0]), min(canvas.shape[1], blocks.shape[1])
    canvas[:rows, :cols] = blocks[:rows, :cols]
    return np.repeat(np.repeat(canvas, block, axis=0), block, axis=1)[:height, :width]


def widen_to_blocks(pixels: np.ndarray, block: int = MASK_BLOCK, spread: int = MASK_SPREAD) -> np.ndarray:
    """Every block of the grid holding a marked pixel, and `spread` blocks around it, marked whole."""
    return blocks_to_pixels(noise_blocks(pixels, block, spread), *pixels.shape, block=block)


def noise_mask(first: Path, second: Path) -> np.ndarray:
    """The block grid of what moved between two baseline shots."""
    a, b = load_rgb(first), load_rgb(second)
    return noise_blocks(changed_pixels(a, b, max(a.shape[0], b.shape[0]), max(a.shape[1], b.shape[1])))


def learn_mask(known: np.ndarray | None, before: Path, after: Path) -> np.ndarray:
    """A mask grown with the blocks that changed between two shots of a page judged healthy (what moves by itself
    on another night: a rotated banner, a date)."""
    moved = noise_mask(before, after)
    if known is None:
        return moved
    rows, cols = max(known.shape[0], moved.shape[0]), max(known.shape[1], moved.shape[1])
    grown = np.zeros((rows, cols), dtype=bool)
    grown[: known.shape[0], : known.shape[1]] |= known
    grown[: moved.shape[0], : moved.shape[1]] |= moved
    return grown


def save_mask(blocks: np.ndarray, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(blocks.astype(np.uint8) * 255, "L").convert("1").save(path, optimize=True)
    return path


def load_mask(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("L")) > 0


def band_of(score: float, pass_threshold: float, fail_threshold: float) -> Band:
    if score < pass_threshold:
        return Band.healthy
    return Band.review if score <= fail_threshold else Band.broken


def diff_image(after: np.ndarray, changed: np.ndarray, mask: np.ndarray) -> Image.Image:
    """The shot after the update, faded: changes in red, the noise mask tinted blue."""
    height, width = changed.shape
    canvas, _ = _padded(after, height, width)
    grey = canvas.mean(axis=2, keepdims=True)
    faded = (grey * 0.35 + 255 * 0.65).repeat(3, axis=2)
    faded[mask] = faded[mask] * 0.7 + np.array([120, 170, 255]) * 0.3
    faded[changed & ~mask] = (230, 20, 20)
    return Image.fromarray(faded.astype(np.uint8), "RGB")


def compare(baseline: Path, second_baseline: Path | None, after: Path, pass_threshold: float, fail_threshold: float,
            diff_path: Path | None = None, reference: Path | None = None, mask: np.ndarray | None = None
            ) -> VisualDiff:
    """Score the shot `after` against `reference` (by default `baseline`: a later step is scored against the shot
    after the step before it), masking `mask` (a block grid) or else what differs between the two baselines;
    write the diff image to `diff_path` when given."""
    later = load_rgb(after)
    before = load_rgb(baseline if reference is None else reference)
    height, width = max(later.shape[0], before.shape[0]), max(later.shape[1], before.shape[1])
    if mask is None:
        if second_baseline is None:
            raise ValueError("a second baseline or a noise mask is needed")
        mask = noise_mask(baseline, second_baseline)
    mask = blocks_to_pixels(mask, height, width)
    changed = changed_pixels(before, later, height, width)
    compared = int((~mask).sum())
    changed_outside = int((changed & ~mask).sum())
    score = changed_outside / compared if compared else 1.0  # all of it moves by itself: nothing to trust
    if diff_path is not None:
        diff_path.parent.mkdir(parents=True, exist_ok=True)
        diff_image(later, changed, mask).save(diff_path, optimize=True)
    return VisualDiff(
        score=score,
        band=band_of(score, pass_threshold, fail_threshold),
        changed_pixels=changed_outside,
        compared_pixels=compared,
        masked_pixels=int(mask.sum()),
        size_before=(before.shape[1], before.shape[0]),
        size_after=(later.shape[1], later.shape[0]),
        diff_path=diff_path,
    )
