"""The `{ns}-tags` abilities (7): tags and the sites and clients carrying them."""

from __future__ import annotations

from typing import Any

from emulator.abilities.context import AbilityContext, page_of
from emulator.abilities.shapes import client_view, site_basic, tag_view


def _clients_of_tag(ctx: AbilityContext, tag_id: int) -> list[Any]:
    client_ids = {ctx.state.sites[s].client_id for s in ctx.state.tag_site_ids(tag_id)}
    return [c for c in ctx.state.list_clients() if c.id in client_ids]


async def list_tags(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    tags = ctx.state.list_tags(search=args.get("search") or None, include=args.get("include") or None,
                               exclude=args.get("exclude") or None)
    page, per_page = args.get("page", 1), args.get("per_page", 20)
    return {"items": [tag_view(ctx.state, t) for t in page_of(tags, page, per_page)], "page": page,
            "per_page": per_page, "total": len(tags)}


async def get_tag(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    return tag_view(ctx.state, ctx.resolve_tag(args["tag_id"]))


async def add_tag(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    name = str(args["name"]).strip()
    if any(t.name.lower() == name.lower() for t in ctx.state.tags.values()):
        raise ctx.fail("already_exists", f'A tag named "{name}" already exists.', 400)
    return tag_view(ctx.state, ctx.state.add_tag(name, args.get("color", "")))


async def update_tag(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    tag = ctx.resolve_tag(args["tag_id"])
    name = args.get("name")
    if name is not None and any(t.name.lower() == str(name).lower() and t.id != tag.id
                                for t in ctx.state.tags.values()):
        raise ctx.fail("already_exists", f'A tag named "{name}" already exists.', 400)
    return tag_view(ctx.state, ctx.state.edit_tag(tag, name=name, color=args.get("color")))


async def delete_tag(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    mode = ctx.destructive_mode(args)
    tag = ctx.resolve_tag(args["tag_id"])
    ctx.require_confirm(mode, "Tag deletion requires confirmation. Set confirm:true to proceed.")
    if mode == "dry_run":
        return {"dry_run": True,
                "would_affect": {"id": tag.id, "name": tag.name, "sites_count": len(ctx.state.tag_site_ids(tag.id)),
                                 "clients_count": len(_clients_of_tag(ctx, tag.id))},
                "warnings": []}
    ctx.state.delete_tag(tag)
    return {"deleted": True, "tag": {"id": tag.id, "name": tag.name}}


async def get_tag_sites(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    tag = ctx.resolve_tag(args["tag_id"])
    sites = [ctx.state.sites[i] for i in ctx.state.tag_site_ids(tag.id)]
    page, per_page = args.get("page", 1), args.get("per_page", 20)
    return {"items": [site_basic(s) for s in page_of(sites, page, per_page)], "page": page, "per_page": per_page,
            "total": len(sites)}


async def get_tag_clients(ctx: AbilityContext, args: dict[str, Any]) -> dict[str, Any]:
    """The schema names `client_id`; the real code emits the client object with `id`, as here."""
    tag = ctx.resolve_tag(args["tag_id"])
    clients = _clients_of_tag(ctx, tag.id)
    page, per_page = args.get("page", 1), args.get("per_page", 20)
    return {"items": [client_view(c) for c in page_of(clients, page, per_page)], "page": page,
            "per_page": per_page, "total": len(clients)}


HANDLERS = {
    "list-tags-v1": list_tags, "get-tag-v1": get_tag, "add-tag-v1": add_tag, "update-tag-v1": update_tag,
    "delete-tag-v1": delete_tag, "get-tag-sites-v1": get_tag_sites, "get-tag-clients-v1": get_tag_clients,
}
