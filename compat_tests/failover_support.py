"""What the failover tests share: a 3-node kafkalike cluster whose brokers are killed (SIGKILL) and
started again under running clients, the wait for the cluster to notice, and the check that
every record a producer had acknowledged is read back once, in its partition's order.

A record's value is ``<tag>-<index>``; records are sent in index order, so within a partition the
indexes read back must increase with the offset, and no index may be read twice (an idempotent
producer's retry must not duplicate a batch the dead leader had already written).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalike.testing.cluster_requests import partition_isrs
from kafkalike.testing.process_cluster import KafkalikeCluster, NodeNotReady, ProcessCluster, wait_until
from kafkalike.testing.wire_client import WireClient

ROOT = Path(__file__).resolve().parents[1]
Cluster = ProcessCluster[Any]  # kafkalike's nodes or Apache Kafka's
PARTITIONS = 6
REPLICATION_FACTOR = 3
MIN_INSYNC = "2"
WAIT_S = 60.0  # a bound on waits that end within seconds when the cluster is right
FIND_COORDINATOR = 10
GROUP_KEY, TRANSACTION_KEY = 0, 1
# A killed broker is fenced 3 s after its last heartbeat (Kafka's 9 s, sooner); a follower that
# stops fetching leaves the ISR after 3 s (Kafka's 30 s). The same rules, in test time.
SETTINGS = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
}


def running_cluster(data_dir: Path) -> Iterator[KafkalikeCluster]:
    """The module's cluster; at the end, no node printed a traceback or an ERROR line, and no
    follower cut its log below its high watermark (what every ISR member has is never taken back)."""
    with KafkalikeCluster(3, data_dir, overrides=SETTINGS, env={"PYTHONPATH": str(ROOT)}) as running:
        yield running
    for node in running.nodes:
        errors = [
            line
            for line in node.output
            if "Traceback" in line or " ERROR " in line or "below its high watermark" in line
        ]
        assert not errors, f"node {node.node_id}: {errors[:5]}"


def every_broker(cluster: Cluster) -> str:
    """All three addresses: a client started while one broker is down still finds the cluster."""
    return ",".join(cluster.node(n).bootstrap for n in cluster.broker_ids)


def value_of(tag: str, index: int) -> bytes:
    return b"%s-%06d" % (tag.encode(), index)


def index_of(value: bytes) -> int:
    return int(value.rsplit(b"-", 1)[1])


def replicated_topic(cluster: Cluster, name: str) -> None:
    """A 6-partition RF=3 topic with min.insync.replicas=2, every partition led and fully in sync."""
    admin = AdminClient({"bootstrap.servers": every_broker(cluster)})
    topic = NewTopic(name, PARTITIONS, REPLICATION_FACTOR, config={"min.insync.replicas": MIN_INSYNC})
    admin.create_topics([topic])[name].result(WAIT_S)
    wait_in_sync(cluster, name)


def in_sync(cluster: Cluster, topic: str) -> bool:
    """Every live broker's Metadata lists every partition of ``topic`` with all three brokers in its ISR."""
    for node in cluster.live_brokers():
        isrs = partition_isrs(node.address, topic)
        if len(isrs) != PARTITIONS or any(len(isr) != REPLICATION_FACTOR for isr in isrs.values()):
            return False
    return True


def wait_in_sync(cluster: Cluster, *topics: str) -> None:
    wait_until(lambda: all(in_sync(cluster, topic) for topic in topics), WAIT_S, f"{', '.join(topics)} fully in sync")


def active_controller(cluster: Cluster) -> int:
    return cluster.active_controller(timeout_s=WAIT_S)


def leader_to_kill(cluster: Cluster, topic: str) -> int:
    """A broker leading some of the topic's partitions, not the active controller (its loss is
    the quorum's own failover, tested elsewhere; here only partition leadership moves)."""
    controller = active_controller(cluster)
    leaders = cluster.partition_leaders(topic)
    candidates = sorted({leader for leader in leaders.values() if leader not in (-1, controller)})
    assert candidates, f"every partition of {topic} is led by the controller {controller}: {leaders}"
    return candidates[0]


def controller_leading(cluster: Cluster, topic: str) -> int:
    """The active controller, when it leads some of the topic's partitions: its loss is both the
    quorum's failover and the partitions'."""
    controller = active_controller(cluster)
    leaders = cluster.partition_leaders(topic)
    assert controller in leaders.values(), f"the controller {controller} leads no partition of {topic}: {leaders}"
    return controller


def kill(cluster: Cluster, node_id: int, topic: str | None = None) -> None:
    """SIGKILL the node; with ``topic``, wait until the survivors lead every partition of it."""
    cluster.node(node_id).kill()
    if topic is not None:
        wait_for_leaders(cluster, topic, excluding=node_id)


def wait_for_leaders(cluster: Cluster, topic: str, excluding: int) -> None:
    def moved() -> bool:
        leaders = cluster.partition_leaders(topic)
        return len(leaders) == PARTITIONS and all(leader not in (-1, excluding) for leader in leaders.values())

    wait_until(moved, WAIT_S, f"{topic} led by the brokers other than {excluding}")


def restart(cluster: Cluster, node_id: int) -> None:
    cluster.node(node_id).start(WAIT_S)


@dataclass
class Outage:
    """Drives a producer through a broker's death and return: a third of the records acknowledged
    before; half of the next third handed to the producer, the broker killed with them in flight,
    the rest handed over and all acknowledged while it is down; the broker started again and the
    last third acknowledged. ``send(i)`` hands record ``i`` to the producer; ``flush()`` returns
    once every record handed over is acknowledged (or fails the test)."""

    cluster: Cluster
    topic: str
    count: int = 300
    victim: Callable[[Cluster, str], int] = leader_to_kill
    killed: int = -1
    timings: dict[str, float] = field(default_factory=dict)

    def run(self, send: Callable[[int], None], flush: Callable[[], None]) -> None:
        third = self.count // 3
        self.killed = self.victim(self.cluster, self.topic)
        for i in range(third):
            send(i)
        flush()
        for i in range(third, third + third // 2):
            send(i)
        started = time.monotonic()
        kill(self.cluster, self.killed)
        for i in range(third + third // 2, 2 * third):
            send(i)
        flush()
        self.timings["acked with a broker down"] = time.monotonic() - started
        restart(self.cluster, self.killed)
        for i in range(2 * third, self.count):
            send(i)
        flush()
        wait_in_sync(self.cluster, self.topic)


def check_acked_records(acked: Collection[bytes], read: list[tuple[int, int, bytes]]) -> None:
    """Every acknowledged value read back exactly once; each partition's values in send order."""
    times_read = Counter(value for _, _, value in read)
    twice = sorted(value for value, seen in times_read.items() if seen > 1)
    assert not twice, f"read more than once: {twice[:10]}"
    lost = sorted(set(acked) - set(times_read))
    assert not lost, f"{len(lost)} acknowledged records lost: {lost[:10]}"
    by_partition: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for partition, offset, value in read:
        by_partition[partition].append((offset, value))
    for partition, records in by_partition.items():
        records.sort()
        indexes = [index_of(value) for _, value in records]
        assert indexes == sorted(indexes), f"partition {partition} out of send order: {indexes}"


def read_all(
    cluster: Cluster, topic: str, at_least: int, isolation: str = "read_uncommitted"
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record of ``topic``, read with librdkafka from offset 0
    of each partition to its end (at least ``at_least`` records)."""
    consumer = Consumer(
        {
            "bootstrap.servers": every_broker(cluster),
            "group.id": f"{topic}-checker",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    read: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + WAIT_S
    try:
        while (len(at_end) < PARTITIONS or len(read) < at_least) and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                error = message.error()
                partition = message.partition() or 0
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(partition)
                    continue
                at_end.discard(partition)
                read.append((partition, message.offset() or 0, message.value() or b""))
    finally:
        consumer.close()
    assert len(at_end) == PARTITIONS, f"partitions {sorted(set(range(PARTITIONS)) - at_end)} not read to the end"
    return read


def coordinator(cluster: Cluster, key: str, key_type: int) -> int:
    """The coordinator's node id for a group (key_type 0) or transactional id (1), asked of a live broker."""
    found: list[int] = []

    def answered() -> bool:
        for node in cluster.live_brokers():
            try:
                with WireClient(node.address.host, node.address.client_port, timeout_s=5.0) as client:
                    response = client.request(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
            except OSError:
                continue
            answer = response.coordinators[0]
            if answer.error_code == 0:
                found.append(answer.node_id)
                return True
        return False

    wait_until(answered, WAIT_S, f"a coordinator for {key}")
    return found[-1]


def key_coordinated_by_a_follower(cluster: Cluster, prefix: str, key_type: int) -> tuple[str, int]:
    """A group or transactional id whose coordinator is not the active controller."""
    controller = active_controller(cluster)
    for number in range(100):
        key = f"{prefix}-{number}"
        node = coordinator(cluster, key, key_type)
        if node != controller:
            return key, node
    raise AssertionError(f"every {prefix}-N is coordinated by the controller {controller}")


def wait_for_coordinator_move(cluster: Cluster, key: str, key_type: int, old: int) -> int:
    def moved() -> int | None:
        node = coordinator(cluster, key, key_type)
        return node if node != old else None

    try:
        return wait_until(moved, WAIT_S, f"the coordinator of {key} off node {old}")
    except NodeNotReady as gone:
        pytest.fail(str(gone))
