"""Bad releases that change a site's pages visually while they still answer 200: the stylesheet gone (the page
links it, the server answers 404), a section rendered blank (both breaks), or a thin notice bar the release
adds at the foot of the window (a change a person should look at, not a break). A mark binds a mode to the
version an item offers, so the change shows once that version is installed and goes with the next release, as
with a real bad release; a direct change (`ground-truth`) shows until it is lifted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

from emulator.records import ItemType, Site

if TYPE_CHECKING:
    from emulator.state import FleetState

VisualMode = Literal["css", "blank", "notice"]
VISUAL_MODES: tuple[str, ...] = get_args(VisualMode)
DIRECT = "ground-truth"
VISUAL_ITEM_TYPES: tuple[ItemType, ...] = ("wp", "plugin", "theme")  # a translation pack moves no version


def installed_version(site: Site, item_type: ItemType, slug: str) -> str | None:
    if item_type == "wp":
        return site.wp_version
    item = site.items(item_type).get(slug)
    return None if item is None else item.version


def offered_version(site: Site, item_type: ItemType, slug: str) -> str | None:
    if item_type == "wp":
        return site.wp_offer
    item = site.items(item_type).get(slug)
    return None if item is None else item.offer


def visual_break(site: Site) -> tuple[VisualMode, str] | None:
    """(mode, culprit) of the break a visitor sees now, or None: a direct break first, then the first marked
    release that is installed and runs (an active plugin, the active theme, core)."""
    direct = site.visual_faults.get(DIRECT)
    if direct:
        return direct[0], DIRECT  # type: ignore[return-value]
    for key, (mode, bad_version) in sorted(site.visual_faults.items()):
        item_type, _, slug = key.partition(":")
        # a deactivated plugin's stylesheet and markup are gone with it, as is an inactive theme's
        if installed_version(site, item_type, slug) == bad_version and site.live(key):  # type: ignore[arg-type]
            return mode, key  # type: ignore[return-value]
    return None


def mark_release(state: FleetState, site: Site, item_type: ItemType, slug: str, mode: VisualMode | None) -> bool:
    """Make the release an item offers now break the page visually once installed (None lifts the mark).
    False when the item offers nothing to mark."""
    key = f"{item_type}:{slug}"
    if mode is None:
        site.visual_faults.pop(key, None)
    else:
        offer = offered_version(site, item_type, slug)
        if not offer:
            return False
        site.visual_faults[key] = [mode, offer]
    state.save_site(site)
    return True


def break_directly(state: FleetState, site: Site, mode: VisualMode | None) -> None:
    """Break the pages visually now, or lift a direct break (None)."""
    if mode is None:
        site.visual_faults.pop(DIRECT, None)
    else:
        site.visual_faults[DIRECT] = [mode, ""]
    state.save_site(site)
