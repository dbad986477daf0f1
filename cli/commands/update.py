"""`fleet update`: apply the policy's updates to a selection now (no checks, no report)."""

from cli.commands.selection import maintenance_app


def _flow():
    from flows.update import update_fleet

    return update_fleet


app = maintenance_app(
    _flow, "update run", "Apply the policy's updates to selected sites now (no health checks, no report).",
    sends_report=False,
)
