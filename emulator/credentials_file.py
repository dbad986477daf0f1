"""The credentials file `fleet emulator serve` writes: what a client needs to reach this dashboard. Apart from
`emulator.auth`, which sits below the state, because it also names the child sites' pages and the feed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from emulator.auth import bearer_token
from emulator.site_pages import site_url_template

if TYPE_CHECKING:
    from emulator.state import FleetState


def credentials(state: FleetState, base_url: str, admin_token: str) -> dict[str, Any]:
    """The credentials file: every api key as its bearer token string."""
    boot = state.meta["bootstrap"]
    keys = boot["api_keys"]
    root = base_url.rstrip("/")
    return {
        "dashboard_url": root.removesuffix("/wp-json"),  # the site root: what MainWP clients call the dashboard URL
        "base_url": root,
        "namespace": state.config.namespace,
        "abilities_url": f"{root}/wp-abilities/v1",
        "api_keys": {role: bearer_token(k["consumer_key"], k["consumer_secret"]) for role, k in keys.items()},
        "v1": {
            "consumer_key": keys["read_write"]["consumer_key"],
            "consumer_secret": keys["read_write"]["consumer_secret"],
        },
        "application_password": dict(boot["application_password"]),
        "admin_token": admin_token,
        "site_url_template": site_url_template(root.removesuffix("/wp-json")),
        "time_scale": state.config.time_scale,  # its clock against the wall: the night's FLEET_TIME_SCALE
        # its Wordfence-shaped feed about its own fleet (FLEET_VULN_FEED; the admin token is the feed's key)
        "vulnerability_feed": f"{root.removesuffix('/wp-json')}/__emulator__/vulnerabilities/production",
    }
