#!/usr/bin/env python3
"""How long a quorum of three ``kafkalike serve`` controller processes takes to replace an active
controller killed with SIGKILL, with Kafka's default quorum timeouts.

    python scripts/bench_controller_failover.py --runs 10
    python scripts/bench_controller_failover.py --runs 10 --kafka-lib DIR   # Apache Kafka's controllers instead
    python scripts/bench_controller_failover.py --runs 10 --graceful        # SIGTERM: the leader resigns first

Each run: wait for a leader that has committed its epoch's first record, SIGKILL it, poll the two
survivors (DescribeQuorum every 10 ms) until one of them leads a later epoch and has committed a
record of it; then start the killed node again and wait until it follows. Prints each run's time
and the median / max. ``--override KEY=VALUE`` sets a config on every node (e.g. shorter timeouts).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kafkalike.testing.controller_processes import ControllerQuorumProcesses

POLL_S = 0.01
WAIT_S = 60.0


def wait_for_leader(quorum: ControllerQuorumProcesses, after_epoch: int, among: list[int]) -> tuple[int, int, int]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = quorum.leader(among)
        if found is not None and found[1] > after_epoch:
            return found
        time.sleep(POLL_S)
    raise RuntimeError(f"no leader among {among} past epoch {after_epoch} within {WAIT_S} s")


def measure(quorum: ControllerQuorumProcesses, runs: int, graceful: bool = False) -> list[float]:
    times_s = []
    ids = list(quorum.nodes)
    leader_id, epoch, _ = wait_for_leader(quorum, 0, ids)
    how = "stopped" if graceful else "killed"
    for run in range(runs):
        killed_at = time.monotonic()
        if graceful:
            quorum.nodes[leader_id].stop()  # SIGTERM: the leader resigns, then exits
        else:
            quorum.kill(leader_id)
        survivors = [i for i in ids if i != leader_id]
        new_id, new_epoch, _ = wait_for_leader(quorum, epoch, survivors)
        elapsed = time.monotonic() - killed_at
        times_s.append(elapsed)
        print(
            f"run {run + 1}: node {leader_id} (epoch {epoch}) {how} -> node {new_id} leads epoch "
            f"{new_epoch} after {elapsed:.3f} s",
            flush=True,
        )
        quorum.nodes[leader_id].start()
        leader_id, epoch = new_id, new_epoch
        wait_until_all_caught_up(quorum, leader_id)
    return times_s


def wait_until_all_caught_up(quorum: ControllerQuorumProcesses, leader_id: int) -> None:
    """The restarted node follows (every voter at the high watermark) before the next kill."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        p = quorum.describe(leader_id)
        if p is not None and p.error_code == 0 and all(v.log_end_offset == p.high_watermark for v in p.current_voters):
            return
        time.sleep(POLL_S)
    raise RuntimeError(f"the voters did not catch up with leader {leader_id} within {WAIT_S} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--graceful", action="store_true", help="SIGTERM the leader instead of SIGKILL")
    parser.add_argument("--kafka-lib", type=Path, help="run Apache Kafka controllers from these jars instead")
    args = parser.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.override)
    with (
        tempfile.TemporaryDirectory(prefix="kafkalike-failover-") as work,
        ControllerQuorumProcesses(Path(work), 3, extra) as quorum,
    ):
        times_s = measure(quorum, args.runs, args.graceful)
    kind = "Apache Kafka" if args.kafka_lib else "kafkalike"
    print(
        f"{kind} failover over {len(times_s)} runs: median {statistics.median(times_s):.3f} s, "
        f"min {min(times_s):.3f} s, max {max(times_s):.3f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
