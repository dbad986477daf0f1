"""The policy's `visual:` key: which pages of a site are screenshotted, at which viewports, and where the bands
between healthy, review and broken lie. Unknown keys are errors, as everywhere in the policy file."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class Viewport(StrEnum):
    desktop = "desktop"
    mobile = "mobile"

    @property
    def size(self) -> dict[str, int]:
        return _SIZES[self]

    @property
    def is_mobile(self) -> bool:
        return self is Viewport.mobile


_SIZES = {Viewport.desktop: {"width": 1280, "height": 800}, Viewport.mobile: {"width": 390, "height": 844}}


def _share(value: Any) -> Any:
    """`0.5%` or a fraction (0.005) -> the fraction."""
    if isinstance(value, str) and (match := _PERCENT.match(value)):
        return float(match.group(1)) / 100
    return value


class ReviewMode(StrEnum):
    gate = "gate"
    report = "report"


class VisualPolicy(BaseModel):
    """`visual: {pages: [...], sitemap_pages: N, viewports: [desktop, mobile], pass: 0.5%, fail: 5%}`; `full_page:
    true` or `screens: 4` for more of each page than its first screen."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    enabled: bool = Field(True, description="Screenshot the sites with planned updates before and after.")
    pages: list[str] = Field(
        default_factory=list,
        description="Paths beside the home page, relative to the site's root (`shop/`, `/contact/`).")
    sitemap_pages: int = Field(4, ge=0, le=50, description="How many more pages to take from the site's sitemap.")
    viewports: list[Viewport] = Field(default_factory=lambda: [Viewport.desktop, Viewport.mobile], min_length=1)
    pass_threshold: float = Field(
        0.005, alias="pass", gt=0, lt=1,
        description="Below this share of changed pixels (outside the noise mask) a page is healthy (`0.5%`).")
    fail_threshold: float = Field(
        0.05, alias="fail", gt=0, le=1,
        description="Above this share a page is broken; between the two it waits for review (`5%`).")
    review: ReviewMode = Field(
        ReviewMode.gate, description="A page in the review band: its versions wait at the approval gate before "
        "they go to more sites tonight (gate), or the change is only reported (report).")
    full_page: bool = Field(
        False, description="Shoot each page whole, however tall, instead of its first `screens` (slower, and "
        "several times the pixels to compare).")
    screens: int = Field(
        2, ge=1, le=20, description="How much of each page a shot holds, from its top, in screens of the viewport "
        "(1280x800, 390x844): what a visitor sees first and as they start to scroll.")
    baseline_gap_seconds: float = Field(
        3.0, ge=0, le=60, description="Between the two baseline shots that show what moves by itself.")

    @field_validator("pass_threshold", "fail_threshold", mode="before")
    @classmethod
    def _parse_share(cls, value: Any) -> Any:
        return _share(value)

    @field_validator("pages")
    @classmethod
    def _check_pages(cls, value: list[str]) -> list[str]:
        paths = []
        for entry in value:
            path = entry.strip().lstrip("/")
            if "://" in path or "\\" in path or ".." in path.split("/") or any(c.isspace() for c in path):
                raise ValueError(f"{entry!r} is not a path under the site's root (write `shop/` or `/contact/`)")
            if path and path not in paths:
                paths.append(path)
        return paths

    @field_validator("viewports")
    @classmethod
    def _unique_viewports(cls, value: list[Viewport]) -> list[Viewport]:
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _bands_in_order(self) -> VisualPolicy:
        if self.pass_threshold >= self.fail_threshold:
            raise ValueError(f"pass ({self.pass_threshold:.2%}) must be below fail ({self.fail_threshold:.2%})")
        return self
