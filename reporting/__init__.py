"""Maintenance reports: aggregation, charts, rendering and delivery, from summary.json alone."""
