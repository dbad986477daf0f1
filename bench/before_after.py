"""The nightly benchmark for two commits side by side in one run: a change that must leave the night no slower and
no bigger (a renovation) is measured, not assumed.

Each round runs this checkout's `bench/nightly.py --variants pipeline` once over each commit's code (a temporary
git worktree, imported first through PYTHONPATH, on the libraries installed here): one measuring code for both,
the commit that goes first alternating from round to round so that neither always meets a cold or a warm machine.
Prints the medians of each commit's night (wall time, orchestration CPU per site, peak RSS) and the after/before
ratios; writes bench/results/before_after.json with every round.

Run: `python bench/before_after.py --before COMMIT [--after HEAD] [--sites 1000] [--rounds 3] [--time-scale 0.01]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MEASURES = (  # (name, unit, how a night's row gives it)
    ("wall", "s", lambda r: r["wall_s"] - r["report_wall_s"]),
    ("cpu per site", "ms", lambda r: 1000 * (r["cpu_s"] - r["report_cpu_s"]) / r["sites"]),
    ("peak RSS", "MB", lambda r: r["peak_rss_mb"]),
    ("requests", "", lambda r: r["requests"]),
    ("updated", "", lambda r: r["updated"]),
)


def checkout(commit: str, into: Path) -> str:
    """A worktree of `commit` at `into`; its full commit id."""
    full = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(into), full], check=True)
    return full


def night(tree: Path, sites: int, time_scale: float, out: Path) -> dict[str, Any]:
    """One pipeline night of `sites`, measured by this checkout's benchmark, with `tree`'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, str(ROOT / "bench" / "nightly.py"), "--sites", str(sites), "--variants",
                    "pipeline", "--time-scale", str(time_scale), "--out", str(out)], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    [row] = json.loads(out.read_text())["results"]
    return row


def table(nights: dict[str, list[dict[str, Any]]], names: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """Medians per commit and after/before ratios, as text and as data."""
    before, after = (nights[key] for key in ("before", "after"))
    lines = [f"{'measure':<14} {'before ' + names['before'][:9]:>18} {'after ' + names['after'][:9]:>18} {'ratio':>7}"]
    lines.append("-" * len(lines[0]))
    medians: dict[str, Any] = {}
    for name, unit, value in MEASURES:
        b, a = statistics.median(map(value, before)), statistics.median(map(value, after))
        ratio = a / b if b else float("nan")
        medians[name] = {"unit": unit, "before": b, "after": a, "ratio": ratio}
        lines.append(f"{name + (f' ({unit})' if unit else ''):<14} {b:>18.2f} {a:>18.2f} {ratio:>7.3f}")
    return "\n".join(lines), medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="The commit measured as before (any git revision).")
    parser.add_argument("--after", default="HEAD", help="The commit measured as after (default: HEAD).")
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=0.01)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "before_after.json")
    args = parser.parse_args()
    if args.rounds < 1 or args.sites < 1:
        parser.error("--rounds and --sites must be at least 1")
    with tempfile.TemporaryDirectory(prefix="fleet-before-after-") as scratch:
        trees = {key: Path(scratch) / key for key in ("before", "after")}
        try:
            names = {key: checkout(getattr(args, key), trees[key]) for key in trees}
            nights: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
            for round_ in range(args.rounds):
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                for key in order:
                    row = night(trees[key], args.sites, args.time_scale, Path(scratch) / f"{key}-{round_}.json")
                    nights[key].append(row)
                    wall = row["wall_s"] - row["report_wall_s"]
                    print(f"round {round_ + 1}/{args.rounds} {key:<6} wall {wall:.1f} s, "
                          f"peak {row['peak_rss_mb']:.0f} MB", flush=True)
        finally:
            for tree in trees.values():
                if tree.exists():
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    text, medians = table(nights, names)
    print()
    print(f"{args.sites:,} sites, {args.rounds} round(s) each, medians")
    print(text)
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"before": names["before"], "after": names["after"], "sites": args.sites,
                               "time_scale": args.time_scale, "cpus": os.cpu_count(), "medians": medians,
                               "nights": nights}, indent=2))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
