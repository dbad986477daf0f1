"""Small pictures of the night's screenshots, drawn with Pillow for the reports.

The screenshots are full-page PNGs (1280 or 390 px wide, often thousands of pixels tall): far too large for an
e-mail. A report shows a JPEG of the top of the page scaled to a few hundred pixels (a client: what a visitor
sees first), or for the operator a window of the same size over the first change the diff image marks in red.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from reporting.model import PageView, Picture

JPEG_QUALITY = 80
LABELS = ("before", "after", "changes")


@dataclass(frozen=True, slots=True)
class Frame:
    """How large a picture is drawn: scaled down to `width` (never up), cut to `height`."""

    width: int
    height: int
    focus: bool  # the window over the first change (the operator's) rather than the top of the page


OPERATOR_FRAME = Frame(width=360, height=540, focus=True)  # three side by side: before, after, changes
CLIENT_FRAME = Frame(width=480, height=700, focus=False)  # two side by side: before, after


def open_shot(run_dir: Path, relative: str, width: int) -> tuple[Image.Image | None, str]:
    """The screenshot scaled to `width`, or why there is none. Only files inside the run directory are read."""
    if not relative:
        return None, "no image"
    root = run_dir.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        return None, "image outside the run directory"
    if not path.is_file():
        return None, "image missing"
    try:
        with Image.open(path) as image:
            image = image.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError):  # not an image, truncated, absurdly large
        return None, "image unreadable"
    if image.width > width:
        image = image.resize((width, max(1, round(image.height * width / image.width))),
                             Image.Resampling.LANCZOS, reducing_gap=3.0)  # fmt: skip
    return image, ""


def first_change(diff: Image.Image) -> int | None:
    """The first row where the diff image marks a change (strong red; the rest of it is faded grey or blue)."""
    pixels = np.asarray(diff, dtype=np.int16)
    red = (pixels[..., 0] > 180) & (pixels[..., 1] < 90) & (pixels[..., 2] < 90)
    rows = np.flatnonzero(red.any(axis=1))
    return int(rows[0]) if rows.size else None


def _jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=JPEG_QUALITY, optimize=True, progressive=True)
    return buffer.getvalue()


def draw_page(run_dir: Path, page: PageView, frame: Frame, cid_prefix: str, labels: tuple[str, ...]) -> list[Picture]:
    """The page's pictures, one per label, each cut at the same rows so that they line up side by side."""
    shots = {label: open_shot(run_dir, page.paths.get(label, ""), frame.width) for label in labels}
    top = 0
    diff = shots.get("changes", (None, ""))[0]
    if frame.focus and diff is not None:
        change = first_change(diff)
        top = max(0, change - frame.height // 8) if change is not None else 0
    pictures = []
    for label, (image, problem) in shots.items():
        picture = Picture(f"{cid_prefix}-{label}", label, page.paths.get(label, ""), problem=problem)
        if image is not None:
            start = max(0, min(top, image.height - frame.height))
            cut = image.crop((0, start, image.width, min(image.height, start + frame.height)))
            picture.jpeg = _jpeg(cut)
        pictures.append(picture)
    return pictures
