"""fleet-maintenance: the application around the dashboard client (CLI, settings, the run's contracts)."""
