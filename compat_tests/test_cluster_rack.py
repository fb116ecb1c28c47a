"""Fetching from the closest replica (KIP-392) with a real client: a 3-node kafkalike cluster of
processes whose brokers stand in racks ``rack-1`` .. ``rack-3`` with the rack-aware replica
selector. A librdkafka consumer with ``client.rack`` naming a follower's rack reads every record,
and that follower logs that it served the partition to consumers as a follower; a consumer with
no rack reads from the leader, which serves nothing of it to a follower."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalike.testing.process_cluster import KafkalikeCluster

pytestmark = pytest.mark.compat
TIMEOUT_S = 30.0
ROOT = Path(__file__).resolve().parents[1]
TOPIC = "racked"
RECORDS = 200
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkalikeCluster]:
    with KafkalikeCluster(
        3,
        tmp_path_factory.mktemp("racks"),
        overrides={"replica.selector.class": SELECTOR, "auto.create.topics.enable": "false"},
        overrides_for={n: {"broker.rack": f"rack-{n}"} for n in (1, 2, 3)},
        env={"PYTHONPATH": str(ROOT)},
    ) as running:
        yield running


def follower_lines(cluster: KafkalikeCluster, node_id: int) -> list[str]:
    return [line for line in cluster.node(node_id).output if f"consumer fetches of {TOPIC}-0 as a follower" in line]


def read_all(bootstrap: str, rack: str | None) -> list[bytes]:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"racked-{rack}",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if rack is not None:
        config["client.rack"] = rack
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        for _ in range(int(TIMEOUT_S / 0.2)):  # bounded: RECORDS arrive within seconds
            values += [m.value() for m in consumer.consume(100, timeout=0.2) if m.error() is None]
            if len(values) >= RECORDS:
                break
        return values
    finally:
        consumer.close()


def test_a_consumer_reads_from_the_follower_in_its_rack(cluster: KafkalikeCluster) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(TIMEOUT_S)
    cluster.wait_for(lambda: cluster.leader(TOPIC, 0) > 0, "a leader", TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    expected = [b"value-%d" % i for i in range(RECORDS)]
    for value in expected:
        producer.produce(TOPIC, value, partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    leader = cluster.leader(TOPIC, 0)
    follower = next(n for n in (1, 2, 3) if n != leader)

    # No rack: the leader serves it, no follower does.
    assert read_all(bootstrap, None) == expected
    assert all(follower_lines(cluster, n) == [] for n in (1, 2, 3) if n != leader)

    # The follower's rack: the leader sends the consumer there, and the follower serves it.
    assert read_all(bootstrap, f"rack-{follower}") == expected
    assert len(follower_lines(cluster, follower)) == 1
    assert follower_lines(cluster, leader) == []
