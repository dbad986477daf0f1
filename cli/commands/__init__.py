"""One typer sub-application per command family of `fleet`."""
