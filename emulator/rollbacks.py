"""MainWP's memory of updates WordPress rolled back (the site option `rollback_updates_data`).

When the child reports an item it updated as rolled back, the dashboard keeps `{name, old_version, version,
created}` under the item's type, slug and the version that failed, and answers the update with the message below;
a later successful install of that version forgets it. The update lists show a remembered item only while that
same version is still the one offered (`MainWP_Updates_Helper::get_roll_items_updates_of_site`): as
`rollback_plugins`/`rollback_themes` of a site's update detail, and as the ability's `rollback_items`.
"""

from __future__ import annotations

import time
from typing import Any

from emulator.records import Item, Site

_KINDS = (("plugin", "plugins"), ("theme", "themes"))


def remember_rollback(site: Site, item_type: str, item: Item) -> str:
    """Record that WordPress rolled `item` back from its offered version; the error the dashboard answers."""
    version = item.offer or ""
    site.rollbacks.setdefault(item_type, {}).setdefault(item.slug, {})[version] = {
        "name": item.name, "old_version": item.version, "version": version, "created": int(time.time())}
    return (f"WordPress detected an error with {item.name} and rolled it back from version {version} "
            f"to version {item.version} to ensure site stability.")


def pending_rollbacks(site: Site) -> dict[str, dict[str, dict[str, Any]]]:
    """{"plugins": {slug: record}, "themes": {...}}: remembered rollbacks of the versions still offered, as the
    dashboard stored them at its last sync (`known_offer`)."""
    view: dict[str, dict[str, dict[str, Any]]] = {}
    for item_type, key in _KINDS:
        items = site.items(item_type)  # type: ignore[arg-type]
        remembered = site.rollbacks.get(item_type, {})
        found = {slug: versions[items[slug].known_offer]  # type: ignore[index]
                 for slug, versions in remembered.items()
                 if slug in items and items[slug].known_offer in versions}
        if found:
            view[key] = found
    return view
