"""`fleet guard`: the fleet's key for Fleet Guard (keygen), the plugin's zip with its public key (build), and what
the guard on each site answers (status). The private key stays in the home's `.env` (or a Prefect Secret block)
and is never printed; only public keys and their short ids are."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="Fleet Guard: the key, the plugin's zip, and what each site's guard answers.",
                  no_args_is_help=True)


@app.command()
def keygen(
    rotate: bool = typer.Option(False, "--rotate", help="Replace the key; the old one is kept as the previous key "
                                "(sites built before accept only it until the rebuilt guard is installed)."),
    block: str | None = typer.Option(None, help="Keep the keys in this Prefect Secret block instead of the home's "
                                     ".env (then set FLEET_GUARD_KEY_BLOCK to its name)."),
) -> None:
    """Make the fleet's Ed25519 key for Fleet Guard (private: the home's .env, mode 600, or a Secret block)."""
    from dashboard.home import fleet_home
    from guard.keys import generate
    from guard.signing import key_id

    try:
        made = generate(fleet_home(), rotate=rotate, block=block)
    except FileExistsError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"guard key {key_id(made.public)}… written to {made.where} (public key {made.public})")
    if made.previous_public:
        typer.echo(f"the previous key {key_id(made.previous_public)}… is still used for sites that do not answer "
                   "the new one: build the guard again (fleet guard build) and install it on every site")


@app.command()
def build(out: Path = typer.Option(Path("."), help="A folder (fleet-guard-<version>.zip goes there) or a .zip path.")) \
        -> None:
    """The guard plugin's zip with the fleet's current public key built in: upload it to the sites with MainWP's
    bulk install (Plugins > Install > Upload .zip) and activate it."""
    from guard.build import build_zip
    from guard.keys import GuardKeyMissing, load_keys
    from guard.signing import key_id

    try:
        keys = load_keys()
    except (GuardKeyMissing, ValueError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    path = build_zip(out, [keys.public])
    typer.echo(f"{path} (accepts the key {key_id(keys.public)}…)")


@app.command()
def status(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """Per site of the dashboard: whether its guard answers (and to which key), its version, what it pauses and
    keeps, and whether the night can count on it; exit 1 when a site's guard cannot be counted on."""
    from cli.errors import exit_code_for
    from dashboard.errors import DashboardError
    from fleet.engine.guard_roll import roll_call
    from fleet.model.vocabulary import count
    from guard.keys import GuardKeyMissing

    try:
        rows = asyncio.run(roll_call())
    except (GuardKeyMissing, ValueError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None
    except DashboardError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(exit_code_for(error)) from None
    if as_json:
        typer.echo(json.dumps([row.as_dict() for row in rows], indent=2))
    else:
        table = Table("id", "site", "guard", "version", "paused", "kept", "the night")
        for row in rows:
            table.add_row(str(row.site_id), f"{row.name}\n{row.url}", row.answers, row.version, ", ".join(row.paused),
                          "\n".join(row.kept), row.verdict)
        Console().print(table)
    usable = sum(1 for row in rows if row.usable)
    typer.echo(f"{count(len(rows), 'site')}: the night can count on the guard of {usable}; "
               f"{len(rows) - usable} it cannot revive (each says why)")
    if usable < len(rows):
        raise typer.Exit(1)
