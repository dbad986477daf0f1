"""`fleet nightly`: run the nightly maintenance flow against the dashboard configured in the environment."""

from cli.commands.selection import maintenance_app


def _flow():
    from flows.nightly import nightly_maintenance

    return nightly_maintenance


app = maintenance_app(
    _flow, "nightly run", "Run the nightly maintenance flow (sync, updates, checks, reconcile, summary, report).",
    sends_report=True, alerts="nightly-maintenance",  # its runs alert on failure: so does one that cannot start
)
