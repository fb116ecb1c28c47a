"""Many partitions (``bench.py --many-partitions 1000,10000``): a 3-node cluster of real
processes (kafkalike's, then Apache Kafka's, never both at once) given that many partitions,
RF=3 (every node holds a replica of each), in topics of at most 1,000 partitions each; then:

- ``create_s``: from the first CreateTopics to every partition led in every node's Metadata;
- ``rss_per_replica_kib``: the growth of the nodes' resident memory over the empty cluster's,
  divided by the replicas they hold (partitions x 3), idle after the creation;
- ``metadata_ms``: Metadata for every topic, asked 20 times of one node (p50 and max);
- ``controller_failover_s``: the active controller SIGKILLed, to a new one naming itself in
  DescribeQuorum and a CreateTopics through it answered; the killed node started again;
- ``restart_s``: every node stopped (SIGTERM), then started together, to every partition led in
  Metadata again (the logs recovered, the metadata log replayed).

The partitions hold no records: this is what partition count alone costs.
"""

from __future__ import annotations

import shutil
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_lib.procstat import rss_bytes

from kafkalike.testing.apache_kafka import ApacheKafkaCluster
from kafkalike.testing.cluster_requests import NodeAddress
from kafkalike.testing.process_cluster import KafkalikeCluster, ProcessCluster
from kafkalike.testing.wire_client import WireClient

Cluster = ProcessCluster[Any]
Say = Callable[[str], None]
NODES = 3
REPLICATION_FACTOR = 3
PER_TOPIC = 1000
METADATA_ASKS = 20
CREATE_TIMEOUT_S = 900.0
WAIT_S = 1800.0
TOPIC = "many"
CREATE_TOPICS, METADATA = 19, 3


def _create(address: NodeAddress, names: list[str], partitions: int, timeout_s: float) -> list[int]:
    topics = [
        {
            "name": n,
            "num_partitions": partitions,
            "replication_factor": REPLICATION_FACTOR,
            "assignments": [],
            "configs": [],
        }
        for n in names
    ]
    with WireClient(address.host, address.client_port, timeout_s=timeout_s) as client:
        response = client.request(CREATE_TOPICS, 5, {"topics": topics, "timeout_ms": int(timeout_s * 1000)})
    return [t.error_code for t in response.topics]


def _metadata(address: NodeAddress, names: list[str], timeout_s: float = 120.0) -> Any:
    body = {"topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names], "allow_auto_topic_creation": False}
    with WireClient(address.host, address.client_port, timeout_s=timeout_s) as client:
        return client.request(METADATA, 12, body)


def _all_led(cluster: Cluster, names: list[str], total: int) -> bool:
    for node in cluster.live_brokers():
        try:
            response = _metadata(node.address, names)
        except (OSError, ConnectionError, ValueError):
            return False
        led = sum(1 for t in response.topics for p in t.partitions if p.error_code == 0 and p.leader_id >= 0)
        if led != total:
            return False
    return True


def _rss(cluster: Cluster) -> int:
    return sum(rss_bytes(node.pid) or 0 for node in cluster.nodes)


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S, every_s: float = 0.5) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise RuntimeError(f"{what}: not after {timeout_s:g} s")
        time.sleep(every_s)
    return time.monotonic() - started


def measure(cluster_of: Callable[[Path], Cluster], label: str, count: int, work: Path, say: Say) -> dict[str, Any]:
    directory = work / f"{label}-{count}"
    shutil.rmtree(directory, ignore_errors=True)
    cluster = cluster_of(directory)
    row: dict[str, Any] = {"target": label, "partitions": count}
    started = time.monotonic()
    with cluster:
        row["empty_start_s"] = round(time.monotonic() - started, 1)
        idle_rss = _rss(cluster)
        per_topic = min(PER_TOPIC, count)
        names = [f"{TOPIC}-{i}" for i in range(count // per_topic)]
        address = cluster.live_brokers()[0].address
        say(f"{label}, {count} partitions: creating {len(names)} topics of {per_topic}")
        began = time.monotonic()
        for name in names:
            errors = _create(address, [name], per_topic, CREATE_TIMEOUT_S)
            if errors != [0]:
                raise RuntimeError(f"{label}: CreateTopics {name} answered {errors}")
        _wait(lambda: _all_led(cluster, names, count), f"{label}: {count} partitions led")
        row["create_s"] = round(time.monotonic() - began, 1)
        time.sleep(5.0)  # idle after the creation: what is left is what the partitions cost
        grown = _rss(cluster) - idle_rss
        row["rss_per_replica_kib"] = round(grown / (count * REPLICATION_FACTOR) / 1024, 1)
        row["rss_total_mib"] = round(_rss(cluster) / 2**20)
        timings = []
        for _ in range(METADATA_ASKS):
            asked = time.monotonic()
            _metadata(address, names)
            timings.append((time.monotonic() - asked) * 1000)
        row["metadata_ms_p50"] = round(statistics.median(timings), 1)
        row["metadata_ms_max"] = round(max(timings), 1)
        say(
            f"{label}, {count}: created in {row['create_s']} s, {row['rss_per_replica_kib']} KiB a replica, "
            f"Metadata p50 {row['metadata_ms_p50']} ms"
        )

        controller = cluster.active_controller()
        cluster.node(controller).kill()
        killed = time.monotonic()
        survivor = next(n for n in cluster.live_brokers() if n.node_id != controller)

        def new_controller_takes_a_topic() -> bool:
            view = cluster.quorum(exclude=[controller])
            if view is None or view.leader_id in (-1, controller):
                return False
            try:
                return _create(survivor.address, [f"after-failover-{uuid.uuid4().hex[:6]}"], 1, 10.0) == [0]
            except (OSError, ConnectionError, ValueError):
                return False

        _wait(new_controller_takes_a_topic, f"{label}: a new controller", 300.0, 0.1)
        row["controller_failover_s"] = round(time.monotonic() - killed, 2)
        cluster.node(controller).start(WAIT_S)
        say(f"{label}, {count}: controller failover {row['controller_failover_s']} s")

        everything = [*names]
        total = count
        cluster.stop()
        began = time.monotonic()
        cluster.start()
        _wait(lambda: _all_led(cluster, everything, total), f"{label}: {count} partitions led after the restart")
        row["restart_s"] = round(time.monotonic() - began, 1)
        say(f"{label}, {count}: restarted and led in {row['restart_s']} s")
    shutil.rmtree(directory, ignore_errors=True)
    return row


def kafkalike_cluster(source: Path) -> Callable[[Path], Cluster]:
    return lambda directory: KafkalikeCluster(NODES, directory, env={"PYTHONPATH": str(source)}, ready_timeout_s=WAIT_S)


def kafka_cluster(lib: Path) -> Callable[[Path], Cluster]:
    return lambda directory: ApacheKafkaCluster(
        NODES, data_dir=directory, lib_dir=lib, heap="1g", ready_timeout_s=WAIT_S
    )


def markdown(rows: list[dict[str, Any]], when: str) -> str:
    lines = [
        f"# Many partitions ({when})",
        "",
        f"{NODES} nodes (broker and controller each) on this machine, RF={REPLICATION_FACTOR}: every node holds "
        f"a replica of every partition; topics of up to {PER_TOPIC} partitions, no records.",
        "",
        "| target | partitions | create (s) | KiB RSS per replica | Metadata p50 / max (ms) | controller failover (s) | restart to led (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['target']} | {r['partitions']:,} | {r['create_s']} | {r['rss_per_replica_kib']} | "
            f"{r['metadata_ms_p50']} / {r['metadata_ms_max']} | {r['controller_failover_s']} | {r['restart_s']} |"
        )
    return "\n".join(lines) + "\n"


def run(out: Path, work: Path, counts: list[int], kafka_lib: Path | None, say: Say) -> int:
    import json

    source = Path(__file__).resolve().parents[2]
    rows = []
    for count in counts:
        rows.append(measure(kafkalike_cluster(source), "kafkalike", count, work, say))
        if kafka_lib is not None:
            rows.append(measure(kafka_cluster(kafka_lib), "apache-kafka", count, work, say))
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    (out / "partitions.json").write_text(json.dumps({"date": when, "rows": rows}, indent=1))
    (out / "partitions.md").write_text(markdown(rows, when))
    say(f"many partitions done: {out / 'partitions.md'}")
    return 0
