#!/usr/bin/env python3
"""Run the deterministic Raft simulation over many seeds, or replay one.

    python scripts/simulate.py --seeds 10000              # every family, seeds 0..9999
    python scripts/simulate.py --family leader_killed --seeds 500 --start 2000
    python scripts/simulate.py --family split_3_2 --seed 42 --trace   # replay one seed, print its events

A failing seed prints its invariant, the seed and the command that replays it; the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
import time

from kafkalike.testing.raft_scenarios import FAMILIES, WIRE, family_named, run_seed
from kafkalike.testing.raft_simulation import InvariantViolation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", action="append", choices=[*FAMILIES, WIRE.name], help="default: all but wire")
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds per family")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="run (replay) only this seed")
    parser.add_argument("--trace", action="store_true", help="print every event of a --seed run")
    args = parser.parse_args(argv)
    families = [family_named(name) for name in args.family or FAMILIES]
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    failures = 0
    for family in families:
        started = time.perf_counter()
        events = 0
        elections: list[int] = []
        for seed in seeds:
            try:
                sim = run_seed(family, seed, trace=args.trace and args.seed is not None)
            except InvariantViolation as exc:
                failures += 1
                if exc.trace is not None:
                    print("\n".join(exc.trace))
                print(f"FAIL {family.name}: {exc}", flush=True)
                continue
            events += sim.events
            elections += sim.elections_ms
            if sim.trace is not None:
                print("\n".join(sim.trace))
        elapsed = time.perf_counter() - started
        line = f"{family.name}: {len(seeds)} seeds, {events} events, {elapsed:.1f} s"
        if elections:
            elections.sort()
            p50, p99 = elections[len(elections) // 2], elections[min(len(elections) - 1, len(elections) * 99 // 100)]
            line += f"; new leader after {p50} ms (median), {p99} ms (p99), {elections[-1]} ms (max) simulated"
        print(line, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
