"""Produce and consume throughput against kafkalike clusters of 1, 2, 3, ... nodes (``bench.py
--cluster-brokers 1,2,3``): for each size, ``KafkalikeCluster(n)`` (combined nodes of one quorum,
real processes on loopback), a topic whose partitions are spread over the brokers (replication
factor 1), librdkafka producers in processes of their own writing 1 KiB values as fast as they
can (acks=all), then one consumer reading everything back from every broker.

Every node is one Python process, so a node uses one core at most; on a machine with fewer cores
than nodes plus load generators, adding brokers adds no CPU and the figures say so.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_lib.scenarios import run_worker, run_workers

from kafkalike.testing.process_cluster import KafkalikeCluster

TOPIC = "bench-cluster"
PARTITIONS = 6
VALUE_SIZE = 1024
PRODUCERS = 2
WORKER_SLACK_S = 120.0


def measure(
    work: Path,
    broker_counts: list[int],
    runs: int,
    seconds: float,
    source: Path,
    say: Callable[[str], None],
) -> list[dict[str, Any]]:
    """One row per cluster size: produce and consume msg/s and MB/s, medians of ``runs``."""
    rows = []
    for count in broker_counts:
        say(f"cluster of {count}: starting")
        with KafkalikeCluster(count, work / f"cluster-{count}", env={"PYTHONPATH": str(source)}) as cluster:
            bootstrap = cluster.bootstrap_servers
            produced, consumed = [], []
            for run in range(runs):
                topic = f"{TOPIC}-{run}"
                if cluster.create_topic(topic, PARTITIONS) != 0:
                    raise RuntimeError(f"cluster of {count}: CreateTopics {topic} failed")
                cluster.wait_for(lambda t=topic: _led(cluster, t), f"leaders of {topic}")
                leaders = sorted(set(cluster.partition_leaders(topic).values()))
                load = {
                    "bootstrap": bootstrap,
                    "topic": topic,
                    "count": 10_000_000,
                    "seconds": seconds,
                    "value_size": VALUE_SIZE,
                    "acks": "all",
                }
                results = run_workers("produce", [load] * PRODUCERS, seconds + WORKER_SLACK_S)
                acked = sum(r["acked"] for r in results)
                wall = max(r["seconds"] for r in results)
                produced.append({"msgs_per_s": acked / wall, "mb_per_s": acked * VALUE_SIZE / wall / 1e6})
                read = run_worker(
                    "consume",
                    {"bootstrap": bootstrap, "topic": topic, "count": acked, "seconds": seconds * 4},
                    seconds * 4 + WORKER_SLACK_S,
                )
                consumed.append(read)
                say(
                    f"cluster of {count}, run {run + 1}: produce {produced[-1]['msgs_per_s']:,.0f} msg/s "
                    f"({produced[-1]['mb_per_s']:.1f} MB/s), consume {read['msgs_per_s']:,.0f} msg/s "
                    f"({read['mb_per_s']:.1f} MB/s), {read['consumed']} of {acked}; partitions led by {leaders}"
                )
        shutil.rmtree(work / f"cluster-{count}", ignore_errors=True)
        rows.append(
            {
                "brokers": count,
                "produce_msgs_per_s": statistics.median(p["msgs_per_s"] for p in produced),
                "produce_mb_per_s": statistics.median(p["mb_per_s"] for p in produced),
                "consume_msgs_per_s": statistics.median(c["msgs_per_s"] for c in consumed),
                "consume_mb_per_s": statistics.median(c["mb_per_s"] for c in consumed),
                "runs": runs,
            }
        )
    return rows


def _led(cluster: KafkalikeCluster, topic: str) -> bool:
    leaders = cluster.partition_leaders(topic)
    return len(leaders) == PARTITIONS and -1 not in leaders.values()


def markdown(rows: list[dict[str, Any]], cores: int, when: str) -> str:
    lines = [
        f"# kafkalike cluster throughput ({when})",
        "",
        f"{PARTITIONS} partitions (RF=1) spread over the brokers, {VALUE_SIZE} B values, acks=all, "
        f"{PRODUCERS} librdkafka producers, one consumer; medians of {rows[0]['runs'] if rows else 0} run(s). "
        f"This machine has {cores} cores shared by the nodes and the load generators: each node is one "
        "Python process (one core at most), so brokers beyond the core count add no CPU.",
        "",
        "| brokers | produce msg/s | produce MB/s | consume msg/s | consume MB/s |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['brokers']} | {r['produce_msgs_per_s']:,.0f} | {r['produce_mb_per_s']:.1f} | "
            f"{r['consume_msgs_per_s']:,.0f} | {r['consume_mb_per_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def run(out: Path, work: Path, broker_counts: list[int], runs: int, say: Callable[[str], None]) -> int:
    import json
    import os

    started = time.monotonic()
    rows = measure(work, broker_counts, runs, 10.0, Path(__file__).resolve().parents[2], say)
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    (out / "cluster.json").write_text(json.dumps({"date": when, "rows": rows}, indent=1))
    (out / "cluster.md").write_text(markdown(rows, os.cpu_count() or 1, when))
    say(f"cluster throughput done in {(time.monotonic() - started) / 60:.1f} min: {out / 'cluster.md'}")
    return 0
