"""The two WordPress core abilities (`site` category): the dashboard's own site and environment."""

from __future__ import annotations

from typing import Any

from emulator.abilities.context import AbilityContext

WORDPRESS_VERSION = "7.0.4"
PHP_VERSION = "8.2.36"


async def get_site_info(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    info = {
        "name": "Fleet Dashboard Emulator", "description": "", "url": ctx.site_root, "wpurl": ctx.site_root,
        "admin_email": "admin@example.com", "charset": "UTF-8", "language": "en-US", "version": WORDPRESS_VERSION,
    }
    fields = args.get("fields") or list(info)
    return {k: v for k, v in info.items() if k in fields}


async def get_environment_info(ctx: AbilityContext, args: Any) -> dict[str, Any]:
    return {"environment": "local", "php_version": PHP_VERSION, "db_server_info": "10.11.19-MariaDB",
            "wp_version": WORDPRESS_VERSION}


HANDLERS = {"core/get-site-info": get_site_info, "core/get-environment-info": get_environment_info}
