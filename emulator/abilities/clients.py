"""The `{ns}-clients` abilities (11): client records, their sites and costs, suspension."""

from __future__ import annotations

from typing import Any

from emulator.abilities.context import AbilityContext, page_of
from emulator.abilities.shapes import client_view, cost_view, site_basic

# Ability input field -> client record field.
CLIENT_FIELDS = {
    "name": "name", "client_email": "client_email", "client_phone": "client_phone", "address_1": "address_1",
    "address_2": "address_2", "city": "city", "state": "state", "zip": "zip", "country": "country",
    "note": "note", "client_facebook": "client_facebook", "client_twitter": "client_twitter",
    "client_instagram": "client_instagram", "client_linkedin": "client_linkedin",
}
DELETE_CLIENT_WARNINGS = [
    "This action is irreversible. The client record will be permanently deleted.",
    "Sites assigned to this client will be unassigned, not deleted.",
]


def _fields(args: dict[str, Any]) -> dict[str, Any]:
    return {CLIENT_FIELDS[k]: str(v) for k, v in args.items() if k in CLIENT_FIELDS}


def _assign_sites(ctx: AbilityContext, client: Any, site_ids: list[int]) -> None:
    unknown = [i for i in site_ids if i not in ctx.state.sites]
    if unknown:
        raise ctx.site_not_found(unknown[0])
    ctx.state.assign_sites_to_client(client, site_ids)


async def list_clients(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    """`status` is accepted and ignored, as the real dashboard's database layer does."""
    args = args or {}
    clients = ctx.state.list_clients(search=args.get("search") or None, include=args.get("include") or None,
                                     exclude=args.get("exclude") or None)
    page, per_page = args.get("page", 1), args.get("per_page", 20)
    return {"items": [client_view(c) for c in page_of(clients, page, per_page)], "page": page,
            "per_page": per_page, "total": len(clients)}


async def count_clients(ctx: AbilityContext, args: Any) -> dict[str, Any]:
    return {"total": len(ctx.state.clients)}


async def get_client(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return client_view(ctx.resolve_client(args["client_id_or_email"]))


async def add_client(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    fields = _fields(args)
    name = fields.pop("name").strip()
    if not name:
        raise ctx.fail("invalid_input", "Client name is required.", 400)
    client = ctx.state.add_client(name, **fields)
    if args.get("selected_sites"):
        _assign_sites(ctx, client, list(args["selected_sites"]))
    return client_view(client)


async def update_client(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    client = ctx.resolve_client(args["client_id_or_email"])
    ctx.state.edit_client(client, **_fields(args))
    if "selected_sites" in args:
        _assign_sites(ctx, client, list(args["selected_sites"]))
    return client_view(client)


async def delete_client(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    mode = ctx.destructive_mode(args)
    client = ctx.resolve_client(args["client_id_or_email"])
    ctx.require_confirm(mode)
    if mode == "dry_run":
        return {"dry_run": True,
                "would_affect": {"client": client_view(client),
                                 "associated_sites_count": len(ctx.state.client_sites(client))},
                "count": 1, "warnings": list(DELETE_CLIENT_WARNINGS)}
    view = client_view(client)
    ctx.state.delete_client(client)
    return view


async def get_client_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    sites = ctx.state.client_sites(ctx.resolve_client(args["client_id_or_email"]))
    return {"items": [site_basic(s) for s in sites], "total": len(sites)}


async def count_client_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"total": len(ctx.state.client_sites(ctx.resolve_client(args["client_id_or_email"])))}


async def get_client_costs(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    costs = ctx.state.client_costs(ctx.resolve_client(args["client_id_or_email"]))
    return {"items": [cost_view(c) for c in costs], "total": len(costs)}


async def suspend_client(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    client = ctx.resolve_client(args["client_id_or_email"])
    return client_view(ctx.state.edit_client(client, suspended=1))


async def unsuspend_client(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    client = ctx.resolve_client(args["client_id_or_email"])
    return client_view(ctx.state.edit_client(client, suspended=0))


HANDLERS = {
    "list-clients-v1": list_clients, "count-clients-v1": count_clients, "get-client-v1": get_client,
    "add-client-v1": add_client, "update-client-v1": update_client, "delete-client-v1": delete_client,
    "get-client-sites-v1": get_client_sites, "count-client-sites-v1": count_client_sites,
    "get-client-costs-v1": get_client_costs, "suspend-client-v1": suspend_client,
    "unsuspend-client-v1": unsuspend_client,
}
