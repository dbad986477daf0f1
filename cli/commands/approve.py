"""`fleet approve RUN_ID`: answer a night's approval gate from a terminal, as the form in the Prefect UI does."""

from __future__ import annotations

import asyncio
import getpass
import json
from typing import Annotated
from uuid import UUID

import typer

# A group whose callback is the command (as `fleet report`); options may follow RUN_ID.
app = typer.Typer(help="Approve the updates a paused night waits on (the approval gate).",
                  invoke_without_command=True, no_args_is_help=True,
                  context_settings={"allow_interspersed_args": True})


FORM_PATIENCE_S = 30.0  # how long a run paused for approval may take to save its form


async def waiting_items(flow_run_id: UUID, patience: float = FORM_PATIENCE_S) -> list[dict]:
    """The rows of the paused run's form, as the flow offered them.

    Prefect saves the form only once the run is Paused (`pause_flow_run` proposes the state, then writes the
    schema): an approval asked for the moment the gate's notice arrives can find the run paused and no form yet.
    It is read again until `patience` runs out, or the run is no longer waiting."""
    import httpx
    from prefect.client.orchestration import get_client

    deadline = asyncio.get_running_loop().time() + patience
    async with get_client() as client:
        while True:
            run = await client.read_flow_run(flow_run_id)
            keyset = run.state.state_details.run_input_keyset if run.state and run.state.is_paused() else None
            if not keyset:
                raise LookupError(f"flow run {flow_run_id} is not waiting for approval (state: "
                                  f"{run.state.name if run.state else 'none'})")
            try:
                schema = json.loads(await client.read_flow_run_input(flow_run_id, keyset["schema"]))
                break
            except httpx.HTTPStatusError as error:
                if error.response.status_code != 404:
                    raise
            if asyncio.get_running_loop().time() >= deadline:
                raise LookupError(f"flow run {flow_run_id} is paused for approval, but its form was not saved "
                                  f"within {patience:g} s (is its process still running?)")
            await asyncio.sleep(0.2)
    return schema["properties"]["items"].get("default", [])


def chosen_rows(items: list[dict], everything: bool, chosen: list[str]) -> list[dict]:
    """Tick the rows named `SITE:ITEM` (site id or domain; the item as in the policy: slug, plugin folder or
    `type:slug`); a name that matches no waiting row is an error that lists the waiting ones."""
    from fleet.model.summary import UpdateType
    from fleet.rules.policy import ItemRef

    wanted = []
    for entry in chosen:
        site, _, ref = entry.strip().partition(":")
        if not site or not ref:
            raise ValueError(f"{entry!r}: give SITE:ITEM, e.g. 12:woocommerce or shop.example:akismet")
        wanted.append((entry, site.lower(), ItemRef.parse(ref)[0]))
    matched: set[str] = set()
    for row in items:
        site_id, domain = row["site"].split(" ", 1)
        type_, slug = row["item"].split(":", 1)
        hits = {entry for entry, site, ref in wanted
                if site in (site_id, domain.lower()) and ref.matches(UpdateType(type_), slug)}
        matched |= hits
        row["approve"] = everything or bool(hits)
    unknown = [entry for entry, _, _ in wanted if entry not in matched]
    if unknown:
        waiting = ", ".join(f"{row['site'].split(' ', 1)[0]}:{row['item']}" for row in items) or "nothing"
        raise ValueError(f"not waiting for approval: {', '.join(unknown)} (waiting: {waiting})")
    return items


async def approve(flow_run_id: UUID, everything: bool, chosen: list[str], by: str) -> tuple[int, int]:
    """Resume the run with the items approved; returns (approved, waiting)."""
    from prefect.flow_runs import aresume_flow_run

    items = chosen_rows(await waiting_items(flow_run_id), everything, chosen)
    await aresume_flow_run(flow_run_id, run_input={"approve_all": everything, "items": items, "approved_by": by})
    return sum(row["approve"] for row in items), len(items)


@app.callback()
def main(
    run_id: Annotated[str, typer.Argument(help="The paused flow run's id (logged and linked when the gate opens).")],
    everything: Annotated[bool, typer.Option("--all", help="Approve every waiting update.")] = False,
    item: Annotated[
        list[str] | None, typer.Option("--item", help="SITE:SLUG to approve (site id or domain); repeatable.")
    ] = None,
    by: Annotated[str, typer.Option(help="Your name, for the report.")] = "",
) -> None:
    """Approve all or some waiting updates; those not approved stay held until the next night."""
    if not everything and not item:
        raise typer.BadParameter("say what to approve: --all, or --item SITE:SLUG", param_hint="--all / --item")
    try:
        flow_run_id = UUID(run_id)
    except ValueError:
        raise typer.BadParameter(f"{run_id!r} is not a flow run id", param_hint="RUN_ID") from None
    try:
        approved, waiting = asyncio.run(approve(flow_run_id, everything, item or [],
                                                by or f"{getpass.getuser()} (fleet approve)"))
    except (LookupError, ValueError) as error:
        typer.secho(str(error), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    from fleet.model.vocabulary import count

    typer.echo(f"approved {approved} of {count(waiting, 'waiting update')}; the run carries on")
