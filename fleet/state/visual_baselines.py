"""The nights' memory of how the watched sites looked: each page's shot after the last night that ended healthy,
and its noise mask learned over the nights (the blocks that moved between healthy shots).

A site's shots are tonight's first baseline when nothing was applied to it since: every version the dashboard
listed for it at that night's end (type, slug, installed version of each pending update) is listed again tonight
with the same installed version. A new offer does not count (its installed version was not listed before); an
item updated since, or one listed with another installed version, does. What the dashboard does not list (an
item with no update pending, changed by hand) cannot be seen here: the first step's shot then shows it, as any
change. The masks are kept whatever was applied: a page with a mask needs one baseline shot, not two.

Files, not rows: `<home>/visual-baselines/<dashboard>/<site>/` holds `site.json` (the versions and the pages) and
`<viewport>/<page>.png` with `<page>.mask.png` beside it, so that a report or a person can open them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from fleet.model.summary import UpdateType

FOLDER = "visual-baselines"
_NOT_NAME = re.compile(r"[^A-Za-z0-9.-]+")

ListedVersions = dict[tuple[UpdateType, str], str]  # (type, slug) -> installed version, as the dashboard lists it


def unchanged_since(before: ListedVersions, tonight: ListedVersions) -> bool:
    """Every version listed at that night's end is listed tonight with the same installed version."""
    return all(tonight.get(key) == version for key, version in before.items())


@dataclass(frozen=True, slots=True)
class KeptPage:
    """One page at one viewport as a healthy night left it."""

    page: str
    url: str
    viewport: str
    shot: Path | None  # None: only its mask is kept
    mask: Path
    console_errors: tuple[str, ...] = ()  # what the shot showed, so that tonight tells only what is new
    failed_requests: tuple[str, ...] = ()


class VisualBaselines:
    """`VisualBaselines(home, dashboard)`: the pages of one dashboard's sites, by the watch's site key."""

    def __init__(self, home: Path, dashboard: str) -> None:
        digest = hashlib.sha256(dashboard.encode()).hexdigest()[:12]
        self.root = home / FOLDER / digest

    def _folder(self, site: str) -> Path:
        return self.root / _NOT_NAME.sub("_", site)

    def kept(self, site: str, tonight: ListedVersions, extent: str) -> dict[tuple[str, str], KeptPage]:
        """The site's kept pages by (page, viewport): with their shot when nothing was applied since, else their
        masks alone; none when they were shot to another `extent` (the policy's `screens` or `full_page` changed)."""
        folder = self._folder(site)
        try:
            record = json.loads((folder / "site.json").read_text())
        except (OSError, ValueError):
            return {}
        if record.get("extent") != extent:
            return {}
        listed = {(UpdateType(type_), slug): version for type_, slug, version in record.get("versions", [])}
        carried = unchanged_since(listed, tonight)
        pages = {}
        for entry in record.get("pages", []):
            shot, mask = folder / entry["shot"], folder / entry["mask"]
            if not mask.is_file():
                continue
            pages[entry["page"], entry["viewport"]] = KeptPage(
                entry["page"], entry["url"], entry["viewport"], shot if carried and shot.is_file() else None, mask,
                tuple(entry.get("console_errors", ())), tuple(entry.get("failed_requests", ())))
        return pages

    def keep(self, site: str, versions: ListedVersions, pages: list[KeptPage], extent: str) -> None:
        """Replace what is kept of the site with these pages (their files copied in), versions and extent."""
        folder = self._folder(site)
        staging = folder.with_name(folder.name + ".new")
        shutil.rmtree(staging, ignore_errors=True)
        entries = []
        for page in pages:
            name = f"{page.viewport}/{_NOT_NAME.sub('_', page.page)}"
            (staging / page.viewport).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page.mask, staging / f"{name}.mask.png")
            if page.shot is not None:
                shutil.copyfile(page.shot, staging / f"{name}.png")
            entries.append({"page": page.page, "url": page.url, "viewport": page.viewport, "shot": f"{name}.png",
                            "mask": f"{name}.mask.png", "console_errors": list(page.console_errors),
                            "failed_requests": list(page.failed_requests)})
        staging.mkdir(parents=True, exist_ok=True)
        (staging / "site.json").write_text(json.dumps({
            "extent": extent,
            "versions": sorted([type_.value, slug, version] for (type_, slug), version in versions.items()),
            "pages": entries}))
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
