"""Extension families (SSL monitor, domain monitor, Lighthouse, Pro Reports): each is a module; a module
that is off has no routes, so its paths answer `rest_no_route`. Values derive from the site id, so they are
stable; running a check or an audit records when it ran."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from emulator.records import Site
from emulator.rest import EDITABLE, READ, RestRequest, RestRoutes, invalid_param
from emulator.rest_v2.common import SITE_ID_OR_DOMAIN, site_or_404
from emulator.rest_v2.shapes import site_simple, wp_time
from emulator.state import FleetState

routes = RestRoutes()
REPORTS = ("wordpress", "plugins", "themes", "uptime", "security", "backups", "updates")


def _stable(site: Site, salt: str, modulo: int) -> int:
    return int(hashlib.sha256(f"{salt}:{site.id}".encode()).hexdigest(), 16) % modulo


def _last_run(state: FleetState, kind: str, site: Site) -> str:
    return wp_time(state.records(kind).get(str(site.id)))


def _ssl(state: FleetState, site: Site) -> dict[str, Any]:
    days = 5 + _stable(site, "ssl", 360)
    return {
        "site_id": site.id,
        "url": site.url,
        "issuer": "R11",
        "valid": site.url.startswith("https"),
        "expiry_date": time.strftime("%Y-%m-%d", time.gmtime(state.now() + days * 86400)),
        "days_left": days,
        "last_check": _last_run(state, "ssl_checks", site),
    }


def _domain(state: FleetState, site: Site) -> dict[str, Any]:
    days = 10 + _stable(site, "domain", 700)
    return {
        "site_id": site.id,
        "domain": site.domain,
        "registrar": "Example Registrar",
        "expiry_date": time.strftime("%Y-%m-%d", time.gmtime(state.now() + days * 86400)),
        "days_left": days,
        "last_check": _last_run(state, "domain_checks", site),
    }


def _lighthouse(state: FleetState, site: Site) -> dict[str, Any]:
    return {
        "site_id": site.id,
        "url": site.url,
        "performance": 40 + _stable(site, "perf", 60),
        "accessibility": 60 + _stable(site, "a11y", 40),
        "best_practices": 70 + _stable(site, "bp", 30),
        "seo": 70 + _stable(site, "seo", 30),
        "last_audit": _last_run(state, "lighthouse_audits", site),
    }


def _family(module: str, listing: str, one: str, check: str, record: str, shape: Any) -> None:
    @routes.add(READ, listing, module=module)
    async def list_all(req: RestRequest) -> dict[str, Any]:
        rows = [shape(req.state, s) for s in req.state.sites.values()]
        return {"success": 1, "total": len(rows), "data": rows}

    @routes.add(READ, rf"{one}/{SITE_ID_OR_DOMAIN}", module=module)
    async def get_one(req: RestRequest) -> dict[str, Any]:
        site = site_or_404(req)
        return {"success": 1, "data": shape(req.state, site), "site": site_simple(site)}

    @routes.add(EDITABLE, rf"{check}/{SITE_ID_OR_DOMAIN}", module=module)
    async def run_check(req: RestRequest) -> dict[str, Any]:
        site = site_or_404(req)
        await req.ops.capacity.work("check", site_id=site.id)
        req.state.save_record(record, str(site.id), req.state.now())
        return {"success": 1, "data": shape(req.state, site), "site": site_simple(site)}


_family("ssl-monitor", "/ssl-monitor/info", "/ssl-monitor/info", "/ssl-monitor", "ssl_checks", _ssl)
_family(
    "domain-monitor",
    "/domain-monitor/profiles",
    "/domain-monitor/profiles",
    "/domain-monitor",
    "domain_checks",
    _domain,
)
_family(
    "lighthouse", "/lighthouse/results", "/lighthouse/results", "/lighthouse/audit", "lighthouse_audits", _lighthouse
)


@routes.add(EDITABLE, "/lighthouse/audit", module="lighthouse")
async def audit_all(req: RestRequest) -> dict[str, Any]:
    now = req.state.now()
    for site in req.state.sites.values():
        req.state.save_record("lighthouse_audits", str(site.id), now)
    return {"success": 1, "message": "Lighthouse audits started.", "total": len(req.state.sites)}


@routes.add(READ, rf"/pro-reports/{SITE_ID_OR_DOMAIN}/(?P<report>[a-zA-Z0-9\-_]+)", module="pro-reports")
async def pro_report(req: RestRequest) -> dict[str, Any]:
    site = site_or_404(req)
    report = req.path_params["report"]
    if report not in REPORTS:
        raise invalid_param("report", f"report is not one of {', '.join(REPORTS)}.", "rest_not_in_enum")
    pending = req.state.pending_updates(site)
    data: dict[str, Any] = {
        "wordpress": {"version": site.wp_version, "update_available": bool(site.known_wp_offer)},
        "plugins": {"installed": len(site.plugins), "updates_pending": sum(u.type == "plugin" for u in pending)},
        "themes": {"installed": len(site.themes), "updates_pending": sum(u.type == "theme" for u in pending)},
        "uptime": {"status": site.monitor.last_status if site.monitor else "unknown"},
        "security": {"ssl": site.url.startswith("https")},
        "backups": {"count": 0},
        "updates": {"pending": len(pending)},
    }[report]
    return {
        "success": 1,
        "data": {
            "report": report,
            "start_date": req.text("start_date"),
            "end_date": req.text("end_date"),
            "values": data,
        },
        "site": site_simple(site),
    }
