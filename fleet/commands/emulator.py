"""`fleet emulator` commands."""

import typer

app = typer.Typer(help="emulator commands.", no_args_is_help=True)
