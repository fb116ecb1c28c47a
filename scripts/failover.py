#!/usr/bin/env python3
"""Controller failover time on a 3-node cluster of real processes: Apache Kafka's or kafkalike's.

    python scripts/failover.py --target kafka --version 4.4.0 --rounds 5
    python scripts/failover.py --target both --rounds 5                # Kafka, then kafkalike, in one run
    python scripts/failover.py --target kafkalike --rounds 5
    python scripts/failover.py --target kafkalike --roles controller   # a quorum of controllers only
    python scripts/failover.py --target kafkalike --graceful           # SIGTERM: the leader resigns first
    python scripts/failover.py --target kafka --kafka-lib DIR          # Kafka's jars from DIR

Every node is broker and controller (or, with ``--roles controller``, a controller only), a voter
of one static quorum, with the product's default timeouts (``--override KEY=VALUE`` sets a config
on every node). Each round: find the active controller (DescribeQuorum), SIGKILL it (with
``--graceful`` SIGTERM, so that it resigns: Kafka's EndQuorumEpoch), then measure from the signal
until

- ``leader``: DescribeQuorum, asked of a surviving node, names a new leader;
- ``create``: a CreateTopics sent to a surviving node succeeds (retried at once after an error or
  a timeout, each attempt with a 5 s request timeout); not measured without brokers;

then start the killed node again (same ports and data) and measure ``rejoin``: until it is ready
and the leader reports its log end offset at the high watermark. The round's figures are printed as
they come, then p50 and max of each. Kafka's jars come from Maven Central through
``compat_lib.tools.resolve_ak`` (what ``scripts/compat.py`` uses). Exit status 1 when the cluster
does not start (kafkalike: until its nodes form a multi-node quorum) or a round times out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))

from kafkalike.testing.apache_kafka import ApacheKafkaCluster  # noqa: E402
from kafkalike.testing.process_cluster import (  # noqa: E402
    COMBINED_ROLES,
    CONTROLLER_ROLE,
    POLL_INTERVAL_S,
    KafkalikeCluster,
    NodeExited,
    NodeNotReady,
    ProcessCluster,
)

Cluster = ProcessCluster[Any]  # kafkalike's or Apache Kafka's nodes
CREATE_TIMEOUT_MS = 5000
ROUND_TIMEOUT_S = 120.0


@dataclass
class Round:
    killed: int
    old_epoch: int
    new_leader: int
    new_epoch: int
    leader_s: float
    create_s: float | None
    create_attempts: int
    create_errors: list[str]
    rejoin_s: float


def watch_for_new_leader(cluster: Cluster, killed: int, t0: float, out: dict[str, float]) -> None:
    """Poll DescribeQuorum on the survivors until one names a leader other than ``killed``."""
    deadline = t0 + ROUND_TIMEOUT_S
    while time.monotonic() < deadline:
        view = cluster.quorum(exclude={killed})
        if view is not None and view.leader_id not in (-1, killed):
            out.update(leader_s=time.monotonic() - t0, leader=view.leader_id, epoch=view.leader_epoch)
            return
        time.sleep(POLL_INTERVAL_S)


def create_until_ok(cluster: Cluster, via: int, name: str, t0: float) -> tuple[float, int, list[str]]:
    """CreateTopics through node ``via`` until one succeeds: (seconds since ``t0``, attempts, errors)."""
    errors: list[str] = []
    attempt = 0
    while time.monotonic() < t0 + ROUND_TIMEOUT_S:
        attempt += 1
        try:
            code = cluster.create_topic(f"{name}-{attempt}", via=via, timeout_ms=CREATE_TIMEOUT_MS)
        except (OSError, ConnectionError) as exc:
            errors.append(type(exc).__name__)
            continue
        if code == 0:
            return time.monotonic() - t0, attempt, errors
        errors.append(f"error {code}")
        time.sleep(POLL_INTERVAL_S)
    raise TimeoutError(f"CreateTopics through node {via} failed for {ROUND_TIMEOUT_S:g} s: {errors[-5:]}")


def caught_up(cluster: Cluster, node_id: int) -> bool:
    view = cluster.quorum()
    return view is not None and view.voters.get(node_id, -1) >= view.high_watermark >= 0


def one_round(cluster: Cluster, number: int, graceful: bool = False) -> Round:
    cluster.wait_for(cluster.formed, "the cluster formed")
    before = cluster.quorum()
    if before is None:
        raise TimeoutError("no node answers DescribeQuorum")
    killed = before.leader_id
    survivor = next((n.node_id for n in cluster.live_brokers() if n.node_id != killed), None)
    found: dict[str, float] = {}
    t0 = time.monotonic()
    if graceful:
        cluster.node(killed).terminate()
    else:
        cluster.node(killed).kill()
    watcher = threading.Thread(target=watch_for_new_leader, args=(cluster, killed, t0, found), daemon=True)
    watcher.start()
    create_s: float | None = None
    attempts, errors = 0, list[str]()
    if survivor is not None:
        create_s, attempts, errors = create_until_ok(cluster, survivor, f"failover-{number}", t0)
    watcher.join(ROUND_TIMEOUT_S)
    if "leader_s" not in found:
        raise TimeoutError(f"no new leader in DescribeQuorum {ROUND_TIMEOUT_S:g} s after node {killed} was killed")
    if graceful:
        cluster.node(killed).wait_stopped()
    restarted = time.monotonic()
    cluster.node(killed).start()
    cluster.wait_for(lambda: caught_up(cluster, killed), f"node {killed} caught up", ROUND_TIMEOUT_S)
    return Round(
        killed=killed,
        old_epoch=before.leader_epoch,
        new_leader=int(found["leader"]),
        new_epoch=int(found["epoch"]),
        leader_s=found["leader_s"],
        create_s=create_s,
        create_attempts=attempts,
        create_errors=errors,
        rejoin_s=time.monotonic() - restarted,
    )


def build_cluster(args: argparse.Namespace, target: str, data_dir: Path) -> Cluster:
    overrides = dict(item.split("=", 1) for item in args.override)
    if target == "kafka":
        lib_dir = args.kafka_lib
        if lib_dir is None:
            from compat_lib.tools import ak_lib_dir, resolve_ak

            problem = resolve_ak(args.version)
            if problem is not None:
                raise SystemExit(f"failover: cannot get Apache Kafka {args.version}: {problem}")
            lib_dir = ak_lib_dir(args.version)
        return ApacheKafkaCluster(args.nodes, data_dir=data_dir, lib_dir=lib_dir, roles=args.roles, overrides=overrides)
    return KafkalikeCluster(args.nodes, data_dir, env={"PYTHONPATH": str(ROOT)}, roles=args.roles, overrides=overrides)


def summary(rounds: list[Round]) -> dict[str, dict[str, float]]:
    figures = {}
    for name in ("leader_s", "create_s", "rejoin_s"):
        values = [getattr(r, name) for r in rounds if getattr(r, name) is not None]
        if not values:
            continue
        figures[name] = {"p50": statistics.median(values), "max": max(values)}
    return figures


def describe(r: Round) -> str:
    create = "no broker to create topics"
    if r.create_s is not None:
        errors = ", " + ", ".join(r.create_errors) if r.create_errors else ""
        create = f"CreateTopics ok in {r.create_s:.2f} s ({r.create_attempts} attempts{errors})"
    return (
        f"killed node {r.killed} (leader, epoch {r.old_epoch}); new leader {r.new_leader} (epoch {r.new_epoch}) "
        f"in {r.leader_s:.2f} s; {create}; restarted node caught up in {r.rejoin_s:.1f} s"
    )


def measure_target(args: argparse.Namespace, target: str) -> tuple[str, list[Round]] | None:
    """Start the target's cluster and run the rounds: (label, rounds), or None when it failed."""
    label = f"Apache Kafka {args.version}" if target == "kafka" else "kafkalike"
    label += f" ({args.roles} nodes{', SIGTERM' if args.graceful else ''})"
    with tempfile.TemporaryDirectory(prefix="kafkalike-failover-") as tmp:
        cluster = build_cluster(args, target, Path(tmp))
        started = time.monotonic()
        try:
            cluster.start()
        except (NodeExited, NodeNotReady) as exc:
            print(f"failover: the {label} cluster did not start: {exc}", file=sys.stderr)
            return None
        rounds: list[Round] = []
        try:
            print(f"{label}: {args.nodes} nodes ready in {time.monotonic() - started:.1f} s", flush=True)
            for number in range(1, args.rounds + 1):
                r = one_round(cluster, number, args.graceful)
                rounds.append(r)
                print(f"round {number}: {describe(r)}", flush=True)
        except (TimeoutError, NodeNotReady) as exc:
            print(f"failover: {label}: {exc}", file=sys.stderr)
            return None
        finally:
            cluster.stop()
    return label, rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=["kafka", "kafkalike", "both"], required=True)
    parser.add_argument("--version", default="4.4.0", help="Apache Kafka's version (--target kafka)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--roles", choices=[COMBINED_ROLES, CONTROLLER_ROLE], default=COMBINED_ROLES)
    parser.add_argument("--graceful", action="store_true", help="SIGTERM the active controller instead of SIGKILL")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a config on every node")
    parser.add_argument("--kafka-lib", type=Path, help="Apache Kafka's jars (--target kafka), instead of resolving")
    parser.add_argument("--json", type=Path, help="also write the rounds and the summary here")
    args = parser.parse_args(argv)
    targets = ["kafka", "kafkalike"] if args.target == "both" else [args.target]
    measured = []
    for target in targets:
        result = measure_target(args, target)
        if result is None:
            return 1
        measured.append(result)
    report = []
    for label, rounds in measured:
        figures = summary(rounds)
        print(f"{label}:")
        for name, text in (("leader_s", "new leader"), ("create_s", "CreateTopics ok"), ("rejoin_s", "rejoin")):
            if name in figures:
                print(f"{text:>16}: p50 {figures[name]['p50']:.2f} s, max {figures[name]['max']:.2f} s")
        report.append({"target": label, "rounds": [asdict(r) for r in rounds], "summary": figures})
    if args.json is not None:
        args.json.write_text(json.dumps(report if len(report) > 1 else report[0], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
