"""Maintenance reports: aggregation, charts, rendering and delivery, from summary.json alone."""

from reporting.run_report import ReportDeliveryError, ReportResult, render_run
from reporting.settings import MailSettings, SmtpSecurity

__all__ = ["MailSettings", "ReportDeliveryError", "ReportResult", "SmtpSecurity", "render_run"]
