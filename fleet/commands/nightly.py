"""`fleet nightly` commands."""

import typer

app = typer.Typer(help="nightly commands.", no_args_is_help=True)
