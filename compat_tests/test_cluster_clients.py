"""Real clients against a 3-node kafkalike cluster of processes (``KafkalikeCluster(3)``, combined
nodes): each client is given one node's address only and finds the others through Metadata.

- confluent-kafka (librdkafka) and kafka-python produce keyed records to a 6-partition topic whose
  partitions are led by all three brokers, and read every record back, intact and in order;
- a consumer group whose coordinator is another broker than the one the client was given commits,
  and a second consumer of that group resumes from the committed offsets;
- a transaction whose coordinator is another broker writes to partitions of every broker: a
  committed one is read by a read_committed consumer, an aborted one is not.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from compat_tests.support import Received, check_round_trip, make_messages
from kafkalike.testing.process_cluster import KafkalikeCluster
from kafkalike.testing.wire_client import WireClient

pytestmark = pytest.mark.compat
TIMEOUT_S = 30.0
PARTITIONS = 6
ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.num.partitions": "6",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "offsets.topic.replication.factor": "1",
}
FIND_COORDINATOR = 10
GROUP_KEY, TRANSACTION_KEY = 0, 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkalikeCluster]:
    with KafkalikeCluster(
        3, tmp_path_factory.mktemp("cluster"), overrides=SETTINGS, env={"PYTHONPATH": str(ROOT)}
    ) as running:
        yield running
    for node in running.nodes:
        errors = [line for line in node.output if "Traceback" in line or " ERROR " in line]
        assert not errors, f"node {node.node_id}: {errors}"


def first_node(cluster: KafkalikeCluster) -> str:
    """The one address clients are given."""
    return cluster.node(cluster.broker_ids[0]).bootstrap


def spread_topic(cluster: KafkalikeCluster, name: str) -> dict[int, int]:
    """A 6-partition RF=1 topic created through the first node with confluent-kafka's admin
    client; its partitions' leaders, once every partition has one, led by all three brokers."""
    admin = AdminClient({"bootstrap.servers": first_node(cluster)})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(TIMEOUT_S)
    leaders: dict[int, int] = {}

    def led() -> bool:
        leaders.update(cluster.partition_leaders(name))
        return len(leaders) == PARTITIONS and -1 not in leaders.values()

    cluster.wait_for(led, f"leaders of {name}", TIMEOUT_S)
    assert set(leaders.values()) == set(cluster.broker_ids), leaders
    return leaders


def coordinator(cluster: KafkalikeCluster, key: str, key_type: int) -> int:
    """The coordinator's node id for a group (key_type 0) or transactional id (1), asked of the first node."""
    node = cluster.node(cluster.broker_ids[0])
    found: list[int] = []

    def answered() -> bool:
        with WireClient(node.address.host, node.address.client_port, timeout_s=TIMEOUT_S) as client:
            response = client.request(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
        answer = response.coordinators[0]
        if answer.error_code != 0:
            return False
        found.append(answer.node_id)
        return True

    cluster.wait_for(answered, f"a coordinator for {key}", TIMEOUT_S)
    return found[-1]


def key_coordinated_elsewhere(cluster: KafkalikeCluster, prefix: str, key_type: int) -> tuple[str, int]:
    """A group or transactional id whose coordinator is not the node the clients are given."""
    first = cluster.broker_ids[0]
    for number in range(100):
        key = f"{prefix}-{number}"
        node = coordinator(cluster, key, key_type)
        if node != first:
            return key, node
    raise AssertionError(f"every {prefix}-N is coordinated by node {first}")


def confluent_read(
    bootstrap: str, topic: str, count: int, group: str, isolation: str = "read_uncommitted"
) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                assert message.error() is None, message.error()
                got.append(message)
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def test_confluent_kafka_produces_and_consumes_across_three_brokers(cluster: KafkalikeCluster) -> None:
    topic = "confluent-spread"
    spread_topic(cluster, topic)
    sent = make_messages(60, keys=7)
    producer = Producer({"bootstrap.servers": first_node(cluster), "acks": "all", "enable.idempotence": True})
    for m in sent:
        producer.produce(topic, m.value, m.key, headers=list(m.headers), timestamp=m.timestamp_ms)
    assert producer.flush(TIMEOUT_S) == 0
    received = [
        Received(
            m.partition(),
            m.offset(),
            m.key(),
            m.value(),
            tuple(m.headers() or ()),
            m.timestamp()[1],
            m.timestamp()[0] == 1,
        )
        for m in confluent_read(first_node(cluster), topic, len(sent), "confluent-spread-reader")
    ]
    check_round_trip(sent, received, PARTITIONS)


def test_kafka_python_produces_and_consumes_across_three_brokers(cluster: KafkalikeCluster) -> None:
    topic = "kafka-python-spread"
    spread_topic(cluster, topic)
    sent = make_messages(60, keys=7)
    producer = KafkaProducer(bootstrap_servers=first_node(cluster), acks="all")
    for m in sent:
        producer.send(topic, m.value, m.key, headers=list(m.headers), timestamp_ms=m.timestamp_ms)
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=first_node(cluster),
        group_id="kafka-python-spread-reader",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    received: list[Received] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(received) < len(sent) and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            received += [
                Received(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp, r.timestamp_type == 0)
                for r in records
            ]
    consumer.close()
    check_round_trip(sent, received, PARTITIONS)


def test_a_group_coordinated_by_another_broker_resumes_from_its_commits(cluster: KafkalikeCluster) -> None:
    topic = "group-resume"
    spread_topic(cluster, topic)
    producer = Producer({"bootstrap.servers": first_node(cluster)})
    for i in range(30):
        producer.produce(topic, b"first-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0
    group, coordinator_id = key_coordinated_elsewhere(cluster, "resume-group", GROUP_KEY)
    assert coordinator_id != cluster.broker_ids[0]
    assert len(confluent_read(first_node(cluster), topic, 30, group)) == 30  # and commits them
    for i in range(12):
        producer.produce(topic, b"second-%d" % i, partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0
    resumed = confluent_read(first_node(cluster), topic, 12, group)
    assert sorted(m.value() for m in resumed) == sorted(b"second-%d" % i for i in range(12))


def test_transactions_coordinated_by_another_broker_commit_and_abort(cluster: KafkalikeCluster) -> None:
    topic = "txn-spread"
    spread_topic(cluster, topic)
    # The first transactional producer has __transaction_state made (its first FindCoordinator
    # asks for it and is answered COORDINATOR_NOT_AVAILABLE, as by Kafka); then the ids spread
    # over the brokers.
    first = Producer({"bootstrap.servers": first_node(cluster), "transactional.id": "txn-first"})
    first.init_transactions(TIMEOUT_S)
    transactional_id, _ = key_coordinated_elsewhere(cluster, "txn", TRANSACTION_KEY)
    producer = Producer({"bootstrap.servers": first_node(cluster), "transactional.id": transactional_id})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(PARTITIONS * 2):
        producer.produce(topic, b"committed-%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    for i in range(PARTITIONS):
        producer.produce(topic, b"aborted-%d" % i, partition=i)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"last", partition=0)
    producer.commit_transaction(TIMEOUT_S)

    consumer = Consumer(
        {
            "bootstrap.servers": first_node(cluster),
            "group.id": "txn-reader",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while (len(at_end) < PARTITIONS or b"last" not in values) and time.monotonic() < deadline:
            for message in consumer.consume(100, 0.5):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    at_end.add(message.partition() or 0)
                    continue
                values.append(message.value() or b"")
    finally:
        consumer.close()
    assert sorted(values) == sorted([b"committed-%d" % i for i in range(PARTITIONS * 2)] + [b"last"])
