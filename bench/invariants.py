"""The promise "a bad version never breaks a site twice" over many generated sequences of nights.

Runs `tests/pipeline/night_invariants.NightsMachine` (Hypothesis's rule-based state machine: releases good, a
front-end fatal or fatal at load offered to some sites and to others later; whole-fleet nights, selections, dry
runs, a lost answer, a site that cannot be synced; repairs by hand, holds released, sites added), each night
through `fleet nightly` against a fresh emulator on a real socket, on a Prefect test server. Every violation is
counted (not only the first) with the sequence that led to it.

Run: `python bench/invariants.py [--sequences 500] [--steps 8] [--nights 6]` (the sequences are drawn afresh on
each run; a sequence with fewer nights than `--nights` ends with whole-fleet nights until it has them).
Prints a table and writes bench/results/invariants.json (the sequences, the nights checked, the violations).
A night costs about 3 s of wall time on the Prefect test server: 500 sequences of 8 steps take hours.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # bench/emulator.py would shadow the `emulator` package

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=500, help="generated sequences to run")
    parser.add_argument("--steps", type=int, default=8, help="most rules per sequence (after its first night)")
    parser.add_argument("--nights", type=int, default=6, help="least nights per sequence (whole-fleet nights end "
                                                               "a shorter one)")
    parser.add_argument("--minutes", type=float, default=0, help="stop starting sequences after this long (0: none); "
                                                                  "what ran is reported")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "invariants.json")
    args = parser.parse_args()

    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test
    from prefect.testing.utilities import prefect_test_harness

    from tests.pipeline import night_invariants as machine

    machine.RAISE = False  # count every violation; none stops the run
    machine.NightsMachine.min_nights = args.nights
    with prefect_test_harness(server_startup_timeout=120):
        started = time.perf_counter()  # the Prefect test server is up: the sequences' time starts
        machine.NightsMachine.stop_at = started + args.minutes * 60 if args.minutes else None
        try:
            run_state_machine_as_test(machine.NightsMachine, settings=settings(
                max_examples=args.sequences, stateful_step_count=args.steps, deadline=None, database=None,
                phases=[Phase.generate], suppress_health_check=list(HealthCheck)))
        except Exception:
            if not machine.NightsMachine.timed_out:
                raise
            print(f"stopped after {args.minutes} minutes", flush=True)
    seconds = time.perf_counter() - started
    stats = machine.STATS
    nights_per_sequence = stats["nights"] / max(1, stats["sequences"])
    rows = [("sequences", stats["sequences"]), ("nights checked", stats["nights"]),
            ("nights per sequence", f"{nights_per_sequence:.1f}"),
            (f"sequences of >= {args.nights} nights", sum(1 for s in machine.SEQUENCES if nights_in(s) >= args.nights)),
            ("releases that broke a site", stats["breaking releases"]),
            ("items withheld by a hold", stats["items withheld"]),
            ("sites down at a night's end", stats["sites down"]),
            ("violations", len(machine.VIOLATIONS)), ("wall seconds", f"{seconds:.0f}")]
    print(f"{'invariants over generated nights':<32} {'':>10}")
    for label, value in rows:
        print(f"{label:<32} {value!s:>10}")
    for violation in machine.VIOLATIONS[:20]:
        print(f"VIOLATION night {violation['night']}: {violation['violation']}\n  after: "
              + "; ".join(violation["sequence"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": platform.platform(), "python": platform.python_version(),
        "steps": args.steps, "least_nights": args.nights, "sequences": stats["sequences"],
        "nights": stats["nights"], "covered": stats,
        "violations": machine.VIOLATIONS, "wall_seconds": round(seconds, 1),
        "all_sequences": machine.SEQUENCES}, indent=1))
    print(f"written: {args.out}")
    sys.exit(1 if machine.VIOLATIONS else 0)


def nights_in(steps: list[str]) -> int:
    return sum(1 for step in steps if "night" in step.split("#")[0])


if __name__ == "__main__":
    main()
