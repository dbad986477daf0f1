"""A batch call's errors back to the sites they are about: the dashboard names a site by id, URL or domain."""

from __future__ import annotations

from dashboard.models import BatchSiteError
from fleet.rules.plan import SiteRecord


class SiteErrorIndex:
    """Maps the identifiers batch errors carry (a site id, its URL or its domain) back to site ids."""

    def __init__(self, sites: list[SiteRecord]) -> None:
        self._ids = {}
        for site in sites:
            for key in (*site.names, site.url.lower().rstrip("/")):
                self._ids[key] = site.id

    def site_id(self, error: BatchSiteError) -> int | None:
        if error.site_id:
            return error.site_id
        for value in (error.identifier, error.site_url):
            text = (value or "").strip().lower().rstrip("/")
            if not text:
                continue
            found = self._ids.get(text) or self._ids.get(SiteRecord(id=0, url=text, name="").domain)
            if found is not None:
                return found
        return None


def error_message(code: str, message: str) -> str:
    """The dashboard's message with its code, as the report shows it."""
    return f"{message} [{code}]" if code else message
