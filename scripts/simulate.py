#!/usr/bin/env python3
"""Run the deterministic simulations over many seeds, or replay one: the Raft quorum's families,
and the replication families (controller + brokers + replication + acks=all producer and
consumer, ``kafkalike/testing/replication_simulation.py``).

    python scripts/simulate.py --seeds 10000              # every family, seeds 0..9999
    python scripts/simulate.py --family leader_killed --seeds 500 --start 2000
    python scripts/simulate.py --family split_3_2 --seed 42 --trace   # replay one seed, print its events
    python scripts/simulate.py --family lose_unflushed_tail --seeds 200 --file-logs  # logs in real files
    python scripts/simulate.py --family replication --seeds 1000
    python scripts/simulate.py --family replication --seed 7 -v       # -v is --trace

A failing seed prints its invariant, the seed and the command that replays it; the exit status is 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kafkalike.testing.raft_file_log import SimFileRaftLog
from kafkalike.testing.raft_scenarios import FAMILIES, WIRE, family_named, run_seed
from kafkalike.testing.raft_simulation import InvariantViolation, LogFactory
from kafkalike.testing.replication_simulation import FAMILIES as REPLICATION_FAMILIES
from kafkalike.testing.replication_simulation import LOSSY_FAMILIES
from kafkalike.testing.replication_simulation import InvariantViolation as ReplicationViolation
from kafkalike.testing.replication_simulation import run_seed as run_replication_seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--family",
        action="append",
        choices=[*FAMILIES, WIRE.name, *REPLICATION_FAMILIES],
        help="default: all but wire and the lossy replication ones (" + ", ".join(sorted(LOSSY_FAMILIES)) + ")",
    )
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds per family")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="run (replay) only this seed")
    parser.add_argument("--trace", "-v", action="store_true", help="print every event of a --seed run")
    parser.add_argument(
        "--file-logs",
        action="store_true",
        help="each node's log in a temp directory (FileRaftLog), crashes cutting files",
    )
    args = parser.parse_args(argv)
    names = args.family or [*FAMILIES, *(f for f in REPLICATION_FAMILIES if f not in LOSSY_FAMILIES)]
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    failures = 0
    for name in [n for n in names if n in REPLICATION_FAMILIES]:
        failures += run_replication(name, seeds, trace=args.trace and args.seed is not None)
    families = [family_named(name) for name in names if name not in REPLICATION_FAMILIES]
    for family in families:
        started = time.perf_counter()
        events = 0
        elections: list[int] = []
        for seed in seeds:
            try:
                with tempfile.TemporaryDirectory(prefix="kafkalike-sim-") as root:
                    opened: list[SimFileRaftLog] = []
                    try:
                        sim = run_seed(
                            family,
                            seed,
                            trace=args.trace and args.seed is not None,
                            log_factory=file_logs(Path(root), opened) if args.file_logs else None,
                        )
                    finally:
                        for log in opened:
                            log.close()
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


def run_replication(name: str, seeds: Sequence[int], *, trace: bool) -> int:
    """One replication family over ``seeds``; how many failed (a lossy family's are expected)."""
    started = time.perf_counter()
    events = failures = 0
    totals: dict[str, int] = {}
    logging.disable(logging.WARNING)  # the brokers' and controller's own logs: the trace tells
    for seed in seeds:
        try:
            sim = run_replication_seed(name, seed, trace=trace)
        except ReplicationViolation as exc:
            failures += 1
            if exc.trace is not None:
                print("\n".join(exc.trace))
            print(f"FAIL {name}: {exc}", flush=True)
            continue
        events += sim.events
        for key, value in sim.stats.items():
            totals[key] = totals.get(key, 0) + value
        if sim.trace is not None:
            print("\n".join(sim.trace))
    logging.disable(logging.NOTSET)
    elapsed = time.perf_counter() - started
    summary = ", ".join(f"{k} {v}" for k, v in totals.items())
    print(f"{name}: {len(seeds)} seeds, {events} events, {elapsed:.1f} s; {summary}", flush=True)
    return failures


def file_logs(root: Path, opened: list[SimFileRaftLog]) -> LogFactory:
    def make(node_id: int) -> SimFileRaftLog:
        log = SimFileRaftLog.create(root / f"node-{node_id}" / "__cluster_metadata-0")
        opened.append(log)
        return log

    return make


if __name__ == "__main__":
    sys.exit(main())
