"""Typed client of a MainWP-style dashboard: the only code in the project that speaks HTTP to one."""

from dashboard.client import DashboardClient
from dashboard.jobs import WaitPolicy
from dashboard.settings import DashboardSettings

__all__ = ["DashboardClient", "DashboardSettings", "WaitPolicy"]
