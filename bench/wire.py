"""What a request costs the night in CPU, over each engine under the client (aiohttp's and httpx's own).

Against a fresh `fleet emulator serve` process (200 sites, a time scale so small the model's work costs nothing),
the client sends `--requests` calls of each kind, 8 at a time, through `DashboardClient` (its retries, error
mapping and the validation of each answer included), engines alternating for `--rounds` rounds. CPU is this
process's (the emulator runs apart). Prints a table of medians and the ratio, writes bench/results/wire.json.

Run: `python bench/wire.py [--requests 1500] [--rounds 3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from dashboard.client import DashboardClient
from dashboard.errors import DashboardError

ROOT = Path(__file__).resolve().parent.parent
FLEET = str(Path(sys.executable).parent / "fleet")
ENGINES = ("httpx", "aiohttp")
CALLS = ("get-site-updates-v1 (ability)", "POST /sites/{id}/sync (REST v2)")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def cpu_per_request(credentials: dict[str, Any], engine: str, call: str, requests: int) -> float:
    """Milliseconds of CPU per call of `call` over `engine`."""
    async with DashboardClient.from_credentials(credentials, http_engine=engine) as client:
        send = client.site_updates if call.startswith("get-site") else client.sync_site
        in_flight = asyncio.Semaphore(8)

        async def answers(site_id: int) -> bool:
            async with in_flight:
                try:
                    await send(site_id)
                except DashboardError:  # offline, suspended: the generated fleet has some
                    return False
                return True

        sites = [site.id for site in await client.list_sites()]
        answered = await asyncio.gather(*(answers(site_id) for site_id in sites))  # and the pool is warm
        ids = [site_id for site_id, ok in zip(sites, answered, strict=True) if ok]

        async def one(index: int) -> None:
            async with in_flight:
                await send(ids[index % len(ids)])

        started = cpu_seconds()
        await asyncio.gather(*(one(index) for index in range(requests)))
        return (cpu_seconds() - started) / requests * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "wire.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        credentials_file = Path(scratch) / "credentials.json"
        emulator = subprocess.Popen(
            [FLEET, "emulator", "serve", "--port", "0", "--sites", "200", "--seed", "1", "--time-scale", "0.00001",
             "--slow-site-rate", "0", "--credentials-out", str(credentials_file)],
            stdout=subprocess.PIPE, text=True,
        )
        try:
            if not (emulator.stdout and emulator.stdout.readline().startswith("http://")):
                raise RuntimeError("the emulator did not start")
            credentials = json.loads(credentials_file.read_text())
            samples: dict[tuple[str, str], list[float]] = {(call, e): [] for call in CALLS for e in ENGINES}
            for _ in range(args.rounds):
                for call in CALLS:
                    for engine in ENGINES:
                        ms = asyncio.run(cpu_per_request(credentials, engine, call, args.requests))
                        samples[call, engine].append(ms)
        finally:
            emulator.terminate()
            emulator.wait(timeout=60)
    rows = []
    print(f"{'call':<32} {'httpx ms':>9} {'aiohttp ms':>10} {'aiohttp / httpx':>15}")
    for call in CALLS:
        httpx_ms, aiohttp_ms = (statistics.median(samples[call, e]) for e in ENGINES)
        rows.append({"call": call, "httpx_ms": httpx_ms, "aiohttp_ms": aiohttp_ms, "ratio": aiohttp_ms / httpx_ms,
                     "samples": {e: samples[call, e] for e in ENGINES}})
        print(f"{call:<32} {httpx_ms:>9.3f} {aiohttp_ms:>10.3f} {aiohttp_ms / httpx_ms:>15.2f}")
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "requests": args.requests,
                               "rounds": args.rounds, "results": rows}, indent=2))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
