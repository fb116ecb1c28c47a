#!/usr/bin/env python3
"""Run the broker registration/heartbeat/fencing simulation over many seeds, or replay one.

    python scripts/simulate_brokers.py --seeds 10000            # both families, seeds 0..9999
    python scripts/simulate_brokers.py --family rf1_elr --seeds 500 --start 2000
    python scripts/simulate_brokers.py --family rf1 --seed 42   # replay one seed

A failing seed prints its invariant, the seed and the command that replays it; the exit status is 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from kafkalike.testing.broker_simulation import FAMILIES, BrokerSimulation, InvariantViolation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES), help="default: all")
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds per family")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="run (replay) only this seed")
    parser.add_argument("--verbose", action="store_true", help="log what the brokers and the controller do")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(message)s")
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    failures = 0
    for name in args.family or sorted(FAMILIES):
        started = time.perf_counter()
        totals: dict[str, int] = {}
        for seed in seeds:
            try:
                sim = BrokerSimulation(seed, FAMILIES[name], family=name).run()
            except InvariantViolation as exc:
                failures += 1
                print(f"FAIL {name}: {exc}", flush=True)
                continue
            for key, value in sim.stats.items():
                totals[key] = max(totals.get(key, 0), value) if key.startswith("max") else totals.get(key, 0) + value
        elapsed = time.perf_counter() - started
        summary = ", ".join(f"{k} {v}" for k, v in totals.items())
        print(f"{name}: {len(seeds)} seeds, {elapsed:.1f} s; {summary}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
