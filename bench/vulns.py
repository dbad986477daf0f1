"""Vulnerability benchmark: ingest a generated Wordfence v3 feed of the real size, then match a fleet against it.

A feed of about 160 MB (Wordfence's production feed: 117-158 MB, about 42,500 records) is written over 3,000
plugin slugs by the emulator's generator, then read from its file into a fresh state database by a child process
that has already imported the code: wall time, and memory as the growth of the child's peak RSS over its RSS
before the ingest (Linux: the high-water mark is reset through /proc/self/clear_refs first). Then a fleet of
10,000 sites with 30 plugins each (drawn from the same 3,000 slugs, each site on one of a plugin's last 12
releases, half of those behind offered the latest) is matched
in another child: the store's lookup of every (type, slug) and the classification of all 300,000 items.

Targets (issue 37): ingest within 150 MB above the process's own memory and 60 s on 2 cores; matching within 2 s.
Run: `python bench/vulns.py [--mb 160] [--sites 10000] [--plugins 30]`. Prints a table and writes
bench/results/vulns.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLUGS = [f"plugin-{n:04d}" for n in range(3000)]
RELEASES = 12  # the releases of one plugin a fleet runs at once (most sites on the last few)


def _status(field: str) -> int:
    """A memory field of /proc/self/status, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def ingest(feed: Path, db: Path) -> dict[str, float]:
    from fleet.engine.vulnerability_feed import refresh_feed
    from fleet.state.vulnerabilities import VulnerabilityStore
    from vulnfeed.settings import FeedSettings

    settings = FeedSettings(_env_file=None, vuln_feed=str(feed))
    store = VulnerabilityStore(db)
    Path("/proc/self/clear_refs").write_text("5")  # the peak from here on
    before = _status("VmRSS")
    started = time.perf_counter()
    status = refresh_feed(settings, store, force=True)
    seconds = time.perf_counter() - started
    peak = _status("VmHWM")
    if status.problem:
        raise SystemExit(status.problem)
    return {"records": status.records, "ingest_s": round(seconds, 2), "rss_before_mb": round(before / 2**20, 1),
            "ingest_growth_mb": round((peak - before) / 2**20, 1)}


def match(db: Path, sites: int, plugins: int) -> dict[str, float]:
    from fleet.rules.vulnerabilities import FleetMatch, feed_key
    from fleet.state.vulnerabilities import VulnerabilityStore

    rng = random.Random(7)
    releases = {slug: sorted({(rng.randrange(1, 12), rng.randrange(0, 20), rng.randrange(0, 30))
                              for _ in range(RELEASES)}) for slug in SLUGS}
    items = []
    for _ in range(sites):
        for slug in rng.sample(SLUGS, plugins):
            known = releases[slug]
            at = rng.randrange(len(known))  # the offered release: the latest, for a site behind it
            offered = ".".join(map(str, known[-1])) if at < len(known) - 1 and rng.random() < 0.5 else None
            items.append((f"{slug}/{slug}.php", ".".join(map(str, known[at])), offered))
    store = VulnerabilityStore(db)
    started = time.perf_counter()
    match = FleetMatch(store.affecting({key for slug, _, _ in items if (key := feed_key("plugin", slug))}))
    looked_up = time.perf_counter()
    classes: dict[str, int] = {}
    for slug, installed, offered in items:
        security = match.classify("plugin", slug, installed, offered).security
        classes[security] = classes.get(security, 0) + 1
    done = time.perf_counter()
    return {"items": len(items), "lookup_s": round(looked_up - started, 2), "classify_s": round(done - looked_up, 2),
            "match_s": round(done - started, 2), **{f"items_{k}": v for k, v in sorted(classes.items())}}


def _child(*args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", *args], check=True, capture_output=True, text=True,
                         cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=160)
    parser.add_argument("--sites", type=int, default=10_000)
    parser.add_argument("--plugins", type=int, default=30)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.child:
        kind, *rest = args.child
        result = ingest(Path(rest[0]), Path(rest[1])) if kind == "ingest" else \
            match(Path(rest[0]), int(rest[1]), int(rest[2]))
        print(json.dumps(result))
        return
    from emulator.vulnerabilities import write_feed

    with tempfile.TemporaryDirectory() as tmp:
        feed, db = Path(tmp) / "feed.json", Path(tmp) / "state.sqlite"
        started = time.perf_counter()
        records = write_feed(feed, size_bytes=int(args.mb * 1_000_000), slugs=SLUGS)
        row = {"feed_mb": round(feed.stat().st_size / 1_000_000, 1), "feed_records": records,
               "generate_s": round(time.perf_counter() - started, 1)}
        row |= _child("ingest", str(feed), str(db))
        row |= _child("match", str(db), str(args.sites), str(args.plugins))
    row |= {"sites": args.sites, "plugins_per_site": args.plugins}
    width = max(map(len, row))
    for key, value in row.items():
        print(f"{key:<{width}}  {value}")
    out = ROOT / "bench" / "results" / "vulns.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "machine": platform.machine(), "row": row},
                              indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
