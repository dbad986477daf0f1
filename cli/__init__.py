"""The command line: everything that starts things (the `fleet` command, the demo, serve) sits here, above flows/."""
