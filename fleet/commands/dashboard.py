"""`fleet dashboard` commands."""

import typer

app = typer.Typer(help="dashboard commands.", no_args_is_help=True)
