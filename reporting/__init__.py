"""Maintenance reports: aggregation, charts, rendering and delivery, from summary.json alone.

Nothing is imported here: `from reporting.settings import MailSettings` (a night's alert, a `fleet` command) then
costs no pandas or matplotlib, which only the report's own modules load."""
