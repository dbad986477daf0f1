"""How hard and how long the night pushes: calls sized by time, bounded fan-out, waiting for quiet, progress."""
