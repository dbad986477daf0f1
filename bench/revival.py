"""What reviving a site dead at load costs, and what it saves: on the emulator (its guard follows the PHP's rules),
sites each updated with three or more active plugins of which one fatals at load, then handled as the night
handles a site after a plugin step (`fleet.engine.culprit.contain_site`, then `fleet.engine.revival.revive`),
two ways on a fresh emulator each:

- `no-guard`: as before the guard: the child is dead, the operator is alerted, every release of the step is held;
- `guard`: every site armed with the fleet's key: the culprit found on the dead site, paused, switched off, its kept
  version put back and switched on, checked and re-synced.

Per way: sites up at the end, the seconds from the break (the update answered) to the site up again (wall, at the
emulator's time scale, and the dashboard's modelled seconds for one revival), requests to the dashboard and to the
guard per revival, and the innocent releases held (the step's releases that are not the culprit but go nowhere
else tonight; the target is 0).

Run: `python bench/revival.py [--sites 10] [--time-scale 0.1]`. Prints a table and writes bench/results/revival.json.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # bench/emulator.py would shadow the `emulator` package

from bench.nightly import ROOT, modelled_work  # noqa: E402 - the nightly benchmark's harness, run as a script too

KEY = base64.b64encode(b"fleet-guard-revival-benchmark!!!").decode()
WAYS = ("no-guard", "guard")


async def one_way(way: str, sites: int, time_scale: float) -> dict[str, Any]:
    import httpx

    from dashboard.client import DashboardClient
    from emulator.config import EmulatorConfig
    from emulator.guard import arm
    from emulator.testing import EmulatorServer
    from fleet.engine.containment import TonightsBreaks
    from fleet.engine.culprit import contain_site
    from fleet.engine.dashboard_switchboard import DashboardSwitchboard
    from fleet.engine.revival import GuardLine, revive
    from fleet.model.settings import PipelineSettings
    from fleet.model.summary import ContainmentStatus, UpdateType
    from fleet.rules.plan import Decision, PlanItem, SiteRecord
    from fleet.rules.policy import Policy
    from guard.client import GuardClient, GuardSite
    from guard.keys import FleetKeys
    from guard.signing import private_key, public_key_text

    keys = FleetKeys(private_key(KEY))
    with EmulatorServer(EmulatorConfig(sites=max(40, sites * 4), seed=7, time_scale=time_scale)) as server:
        state, credentials = server.emulator.state, server.credentials
        chosen = []
        for site in state.sites.values():
            offered = [u for u in state.pending_updates(site, ("plugin",)) if site.plugins[u.slug].active]
            if site.reachable and site.child_connected and not site.suspended and len(offered) >= 3:
                chosen.append((site, offered))
            if len(chosen) == sites:
                break
        settings = PipelineSettings(probe_url_template=credentials["site_url_template"], _env_file=None)
        breaks, rows = TonightsBreaks(), []
        async with DashboardClient.from_credentials(credentials) as client, httpx.AsyncClient(timeout=60) as http:
            for site, offered in chosen:
                bad = offered[len(offered) // 2].slug
                if way == "guard":
                    arm(site, [public_key_text(keys.current)])
                site.fail_items[f"plugin:{bad}"] = "load"
                state.save_site(site)
                applied = [PlanItem(site_id=site.id, type=UpdateType.plugin, slug=u.slug,
                                    name=site.plugins[u.slug].name, from_version=u.current_version,
                                    to_version=u.new_version, decision=Decision.apply) for u in offered]
                await client.update_site_items(site.id, "plugins", [item.slug for item in applied])
                before = dict(state.request_counts)
                guards = GuardClient(http, keys)
                started, modelled = time.perf_counter(), server.emulator.capacity.snapshot(state.sites)
                record = SiteRecord(id=site.id, url=site.url, name=site.name)
                board = DashboardSwitchboard(client, record, http, settings)
                contained = await contain_site(UpdateType.plugin, applied, Policy(), board)
                if contained.status is ContainmentStatus.unreachable:
                    line = GuardLine(guards, GuardSite(site.url, settings.probe_url_template.format(host=site.domain)))
                    contained = await revive(UpdateType.plugin, applied, Policy(), line if way == "guard" else None,
                                             board, contained)
                wall = time.perf_counter() - started
                breaks.learn_break(site.id, site.name, contained, applied)
                calls = sum(state.request_counts.values()) - sum(before.values())
                work = modelled_seconds(server.emulator.capacity.snapshot(state.sites)) - modelled_seconds(modelled)
                rows.append({"site": site.id, "status": contained.status.value, "up": not site.front_end_broken,
                             "wall_s": wall, "dashboard_work_s": work, "dashboard_requests": calls,
                             "guard_requests": guards.calls,
                             "innocent_held": sum(1 for item in applied if item.slug != bad and (
                                 item.type, item.slug, item.to_version) in breaks.versions)})
    revived = [row for row in rows if row["up"]]
    return {"way": way, "sites": len(rows), "up": len(revived), "statuses": sorted({r["status"] for r in rows}),
            "break_to_up_wall_s": mean([r["wall_s"] for r in revived]),
            "break_to_up_modelled_s": mean([r["dashboard_work_s"] for r in revived]),
            "dashboard_requests": mean([r["dashboard_requests"] for r in rows]),
            "guard_requests": mean([r["guard_requests"] for r in rows]),
            "innocent_held": sum(r["innocent_held"] for r in rows), "rows": rows}


def modelled_seconds(capacity: dict[str, Any]) -> float:
    return sum(modelled_work(capacity).values())


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def table(results: list[dict[str, Any]]) -> str:
    def shown(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    header = (f"{'way':<9} {'sites':>5} {'up':>3} {'break->up wall s':>16} {'modelled s':>10} {'dashboard req':>13} "
              f"{'guard req':>9} {'innocent held':>13}  statuses")
    rows = [header, "-" * len(header)]
    for r in results:
        rows.append(f"{r['way']:<9} {r['sites']:>5} {r['up']:>3} {shown(r['break_to_up_wall_s'], 2):>16} "
                    f"{shown(r['break_to_up_modelled_s']):>10} {shown(r['dashboard_requests']):>13} "
                    f"{shown(r['guard_requests']):>9} {r['innocent_held']:>13}  {', '.join(r['statuses'])}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", type=int, default=10)
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "revival.json")
    args = parser.parse_args()
    results = [asyncio.run(one_way(way, args.sites, args.time_scale)) for way in WAYS]
    print(table(results))
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"time_scale": args.time_scale, "python": platform.python_version(),
                               "cpus": os.cpu_count(), "results": results}, indent=2))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
