"""The promises that span runs over many generated sequences of every kind of run and fault.

Runs `tests/pipeline/night_invariants.NightsMachine` (Hypothesis's rule-based state machine: releases good, a
front-end fatal, fatal at load or a visual break offered to some sites and to others later; whole-fleet nights,
selections, dry runs, a lost answer, a site that cannot be synced, a blackout; nights killed with SIGKILL, after a
write or while its answer is lost; hourly security runs after a vulnerability is published; nights of a second
dashboard in the same home; sites removed and added; the feed's setting broken and corrected; the policy's windows
changed, a window closing on work the dashboard has synced; Fleet Guard installed on some sites; repairs by
hand, holds released), each night through `fleet nightly`
against a fresh emulator on a real socket, on a Prefect test server. Every violation is counted (not only the
first) with the promise it broke and the sequence that led to it.

Run: `python bench/invariants.py [--sequences 500] [--steps 8] [--nights 6] [--processes 2]` (the sequences are
drawn afresh on each run; a sequence with fewer nights than `--nights` ends with whole-fleet nights until it has
them). `--processes N` shares the sequences among N processes, each with its own Prefect test server, and adds up
what they checked: a night waits on sockets and Chromium as much as it computes, so two processes use both cores.
Prints a line per sequence and a table, and writes bench/results/invariants.json (the sequences, the nights
checked, the violations). A night costs 1.5 to 6 s of wall time: 500 sequences take an hour or more.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # bench/emulator.py would shadow the `emulator` package

ROOT = Path(__file__).resolve().parent.parent
COUNTED = ("sequences", "nights", "breaking releases", "items withheld", "sites down", "nights killed",
           "security runs", "other dashboard's nights", "deferrals checked", "writes checked", "guarded sites")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=500, help="generated sequences to run (in all)")
    parser.add_argument("--steps", type=int, default=8, help="most rules per sequence (after its first night)")
    parser.add_argument("--nights", type=int, default=6, help="least nights per sequence (whole-fleet nights end "
                                                               "a shorter one)")
    parser.add_argument("--minutes", type=float, default=0, help="stop starting sequences after this long (0: none); "
                                                                  "what ran is reported")
    parser.add_argument("--processes", type=int, default=1, help="processes that share the sequences (each its own "
                                                                 "Prefect test server)")
    parser.add_argument("--name", default="", help=argparse.SUPPRESS)  # a share's name in its progress lines
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "invariants.json")
    args = parser.parse_args()
    if args.sequences < 1 or args.processes < 1 or args.steps < 1 or args.nights < 0 or args.minutes < 0:
        parser.error("--sequences, --processes and --steps must be at least 1; --nights and --minutes not negative")

    started = time.perf_counter()
    results = run_shares(args) if args.processes > 1 else run_here(args)
    results.update({"machine": platform.platform(), "python": platform.python_version(), "steps": args.steps,
                    "least_nights": args.nights, "processes": args.processes,
                    "wall_seconds": round(time.perf_counter() - started, 1)})
    if not args.name:  # a share's table would only repeat part of the whole
        print_table(results, args.nights)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    if not args.name:
        print(f"written: {args.out}")
    sys.exit(1 if results["violations"] or results["errors"] else 0)


def run_here(args: argparse.Namespace) -> dict[str, Any]:
    """The sequences in this process, on one Prefect test server in a Prefect home of its own (as each test
    process has: no share of the run waits on another's database)."""
    from tests.prefect_home import own_prefect_home

    home = own_prefect_home("invariants")
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test
    from prefect.testing.utilities import prefect_test_harness

    from tests.pipeline import night_invariants as machine

    class Counted(machine.NightsMachine):
        def __init__(self) -> None:
            self.said = len(machine.VIOLATIONS)  # those of earlier sequences
            super().__init__()

        def teardown(self) -> None:
            try:
                super().teardown()
            finally:
                print(f"{args.name}sequence {machine.STATS['sequences']}: {self.night_number} nights, "
                      f"{len(machine.VIOLATIONS)} violation(s) so far", flush=True)
                for violation in machine.VIOLATIONS[self.said:]:  # said at once: a long run is read while it runs
                    print(f"{args.name}VIOLATION ({violation['promise']}): {violation['violation']}\n  after: "
                          + "; ".join(violation["sequence"]), flush=True)

    machine.RAISE = False  # count every violation; none stops the run
    machine.NightsMachine.min_nights = args.nights
    with prefect_test_harness(server_startup_timeout=120):
        started = time.perf_counter()  # the Prefect test server is up: the sequences' time starts
        machine.NightsMachine.stop_at = started + args.minutes * 60 if args.minutes else None
        errors = []
        try:
            run_state_machine_as_test(Counted, settings=settings(
                max_examples=args.sequences, stateful_step_count=args.steps, deadline=None, database=None,
                phases=[Phase.generate], suppress_health_check=list(HealthCheck)))
        except Exception as error:  # noqa: BLE001 - what ran is still reported, and the run fails saying why
            if machine.NightsMachine.timed_out:
                print(f"{args.name}stopped after {args.minutes} minutes", flush=True)
            else:
                errors.append(f"{args.name}{type(error).__name__}: {error}"[:4000])
                print(f"{args.name}the run stopped on an error, not a violation: {errors[-1]}\n  in: "
                      + "; ".join(machine.SEQUENCES[-1] if machine.SEQUENCES else []), flush=True)
    shutil.rmtree(home, ignore_errors=True)
    return {"covered": dict(machine.STATS), "violations": machine.VIOLATIONS, "all_sequences": machine.SEQUENCES,
            "sequences_seconds": round(time.perf_counter() - started, 1), "errors": errors}


def run_shares(args: argparse.Namespace) -> dict[str, Any]:
    """The sequences shared among `--processes` copies of this script (their lines prefixed with their share),
    and what they checked added up. A share that stops on an error still gives what it checked; the error is listed
    and fails the run."""
    base, extra = divmod(args.sequences, args.processes)
    with tempfile.TemporaryDirectory(prefix="invariants-") as parts:
        children = []
        for index in range(args.processes):
            share = base + (index < extra)
            if not share:
                continue
            out = Path(parts) / f"share-{index}.json"
            children.append((out, subprocess.Popen([
                sys.executable, __file__, "--sequences", str(share), "--steps", str(args.steps), "--nights",
                str(args.nights), "--minutes", str(args.minutes), "--name", f"[{index + 1}/{args.processes}] ",
                "--out", str(out)])))
        ended = [(out, child.wait()) for out, child in children]
        shares = [json.loads(out.read_text()) for out, _ in ended if out.exists()]  # a failed share's part counts
        lost = [f"{out.name} exited {code} without its results" for out, code in ended if not out.exists()]
    return {"covered": {name: sum(share["covered"][name] for share in shares) for name in COUNTED},
            "violations": [violation for share in shares for violation in share["violations"]],
            "all_sequences": [steps for share in shares for steps in share["all_sequences"]],
            "sequences_seconds": max((share["sequences_seconds"] for share in shares), default=0),
            "errors": lost + [error for share in shares for error in share["errors"]]}


def print_table(results: dict[str, Any], least_nights: int) -> None:
    stats, sequences = results["covered"], results["all_sequences"]
    rows = [("sequences", stats["sequences"]), ("nights checked", stats["nights"]),
            ("nights per sequence", f"{stats['nights'] / max(1, stats['sequences']):.1f}"),
            (f"sequences of >= {least_nights} nights", sum(1 for s in sequences if nights_in(s) >= least_nights)),
            ("releases that broke a site", stats["breaking releases"]),
            ("visual releases offered", sum(1 for s in sequences for step in s if step.startswith("offer('visual'"))),
            ("items withheld by a hold", stats["items withheld"]),
            ("sites down at a night's end", stats["sites down"]),
            ("nights killed (SIGKILL)", stats["nights killed"]), ("security runs", stats["security runs"]),
            ("second dashboard's nights", stats["other dashboard's nights"]),
            ("deferrals checked", stats["deferrals checked"]), ("writes checked", stats["writes checked"]),
            ("sites given Fleet Guard", stats["guarded sites"]),
            ("violations", len(results["violations"])), ("runs stopped on an error", len(results["errors"])),
            ("processes", results["processes"]),
            ("wall seconds", f"{results['wall_seconds']:.0f}")]
    print(f"{'invariants over generated nights':<32} {'':>10}")
    for label, value in rows:
        print(f"{label:<32} {value!s:>10}")
    for error in results["errors"]:
        print(f"ERROR (not a violation): {error}")
    for violation in results["violations"][:20]:
        print(f"VIOLATION night {violation['night']} ({violation['promise']}): {violation['violation']}\n  after: "
              + "; ".join(violation["sequence"]))


def nights_in(steps: list[str]) -> int:
    return sum(1 for step in steps if "night" in step.split("#")[0] and "killed" not in step
               and "another_dashboard" not in step)


if __name__ == "__main__":
    main()
