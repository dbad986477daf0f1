"""Lookups and paging shared by the v2 families."""

from __future__ import annotations

from typing import Any

from emulator.jobs import child_outdated
from emulator.records import Site
from emulator.rest import RestError, RestRequest, page_slice

# A site in a path: its numeric id or its domain (with an optional port), as the dashboard's routes accept it.
SITE_ID_OR_DOMAIN = r"(?P<id_domain>\d+|[A-Za-z0-9\-\.]*[A-Za-z0-9\-]{1,63}\.[A-Za-z]{2,6}(?::\d+)?)"


def site_or_404(req: RestRequest, key: str = "id_domain") -> Site:
    value = req.path_params.get(key, "")
    site = req.state.find_site(value)
    if site is None:
        if value.isdigit():
            raise RestError(req.code("rest_invalid_site_id"), "Invalid or not found site ID.", 404)
        raise RestError(req.code("rest_invalid_site_data"), "Invalid or not found site domain.", 404)
    return site


def sites_by_ids(req: RestRequest, site_ids: list[int]) -> list[Site]:
    """The existing sites among `site_ids`, in that order (unknown ids are left out, as the dashboard does)."""
    return [req.state.sites[i] for i in site_ids if i in req.state.sites]


def paged(req: RestRequest, items: list[Any], default_per_page: int | None = None, maximum: int = 200) -> list[Any]:
    page = req.integer("page", None, minimum=1) or req.integer("paged", None, minimum=1)
    per_page = req.integer("per_page", None, minimum=0, maximum=maximum)
    if page is None and per_page is None:
        return page_slice(items, None, None, default_per_page)
    return page_slice(items, page, per_page, default_per_page if per_page is None else None)


def queue_if_large(req: RestRequest, job_type: str, site_ids: list[int]) -> str | None:
    """Queue background work on more sites than `<ns>_abilities_batch_threshold` and return the job id;
    None (run at once) when under the threshold."""
    jobs = req.emulator.jobs
    if not jobs.should_queue(len(site_ids)):
        return None
    return str(jobs.enqueue(job_type, site_ids)["job_id"])


async def sync_through_ability(req: RestRequest, site: Site) -> bool:
    """Whether a v2 sync of the site went through: the routes sync by `sync-sites-v1`, whose gates refuse a site
    known offline or whose recorded child version is below 4.0.0 before any call to it (the routes show only the
    failure)."""
    return not child_outdated(site) and (await req.ops.sync(site)).ok
