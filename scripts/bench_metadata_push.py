#!/usr/bin/env python3
"""How soon committed metadata takes effect on a 3-node cluster of real processes (kafkalike's
or Apache Kafka's), every node broker and controller:

- ``create@controller`` / ``create@other``: CreateTopics (one RF=1 topic of one partition, v7)
  sent to the active controller's node and to another node, alternating, each until its answer;
- ``visible@other``: from sending CreateTopics to another node until that node's Metadata lists
  the topic with a leader;
- ``fenced``: from SIGSTOP of a node that is not the active controller until another node's
  Metadata no longer lists it (``broker.session.timeout.ms`` 4000, heartbeats every 500 ms).

    python scripts/bench_metadata_push.py --target kafkalike --creates 20 --fencings 3
    python scripts/bench_metadata_push.py --target kafka --kafka-lib compat_tests/.work/ak-4.4.0/lib

Prints each figure's median, min and max in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "compat_tests" / "differential"))

import cluster_scenarios as scenarios  # noqa: E402

from kafkalike.testing.apache_kafka import ApacheKafkaCluster  # noqa: E402
from kafkalike.testing.process_cluster import KafkalikeCluster, ProcessCluster, wait_until  # noqa: E402

SESSION_TIMEOUT_MS = 4000
SETTINGS = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "500",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
}


def create_ms(cluster: ProcessCluster[Any], via: int, name: str) -> tuple[float, float]:
    """CreateTopics through ``via``: ms until its answer, and until ``via`` lists the topic led."""
    node = cluster.node(via)
    start = time.monotonic()
    error, message = scenarios.create_topic(node, name, 1)
    answered = time.monotonic()
    if error:
        raise RuntimeError(f"CreateTopics {name} via {via}: {error} {message}")

    def led() -> bool:
        _, states = scenarios.topic_metadata(node, name)
        return bool(states) and all(s.leader_id >= 0 for s in states.values())

    wait_until(lambda: led() or None, 30.0, f"{name} listed at {via}")
    return (answered - start) * 1000, (time.monotonic() - start) * 1000


def fenced_ms(cluster: ProcessCluster[Any]) -> float:
    controller = cluster.active_controller()
    victim, survivor = (b for b in cluster.broker_ids if b != controller)
    paused = time.monotonic()
    cluster.node(victim).pause()
    try:
        wait_until(
            lambda: victim not in cluster.metadata_brokers(via=survivor) or None,
            4 * SESSION_TIMEOUT_MS / 1000,
            "fencing",
        )
        took = (time.monotonic() - paused) * 1000
    finally:
        cluster.node(victim).resume()
    cluster.wait_for(lambda: cluster.metadata_brokers(via=survivor) == set(cluster.broker_ids), "unfenced", 60.0)
    return took


def report(name: str, values: list[float]) -> None:
    print(
        f"{name:18s} n={len(values):3d} median {statistics.median(values):8.1f} ms"
        f"  min {min(values):8.1f}  max {max(values):8.1f}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=["kafka", "kafkalike"], required=True)
    parser.add_argument("--kafka-lib", type=Path, default=ROOT / "compat_tests/.work/ak-4.4.0/lib")
    parser.add_argument("--creates", type=int, default=20, help="CreateTopics per node kind")
    parser.add_argument("--fencings", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp:
        cluster: ProcessCluster[Any]
        if args.target == "kafka":
            cluster = ApacheKafkaCluster(3, data_dir=tmp, lib_dir=args.kafka_lib, overrides=SETTINGS)
        else:
            cluster = KafkalikeCluster(3, tmp, overrides=SETTINGS, env={"PYTHONPATH": str(ROOT)})
        with cluster.start():
            controller = cluster.active_controller()
            other = next(b for b in cluster.broker_ids if b != controller)
            at_controller: list[float] = []
            at_other: list[float] = []
            visible: list[float] = []
            for i in range(args.creates):
                at_controller.append(create_ms(cluster, controller, f"push-c-{i}")[0])
                answered, listed = create_ms(cluster, other, f"push-o-{i}")
                at_other.append(answered)
                visible.append(listed)
            report("create@controller", at_controller)
            report("create@other", at_other)
            report("visible@other", visible)
            fencings = [fenced_ms(cluster) for _ in range(args.fencings)]
            if fencings:
                report("fenced", fencings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
