"""`fleet report` commands."""

import typer

app = typer.Typer(help="report commands.", no_args_is_help=True)
