"""A kafkalike broker-only node beside an Apache Kafka controller, knowing the quorum through
controller.quorum.bootstrap.servers alone (no controller.quorum.voters): it learns the leader and
its endpoint from the Kafka controller's Fetch answers, follows the metadata log as an observer,
registers with the Kafka controller and is unfenced, leads the partitions given to it, and real
clients write and read through it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from compat_tests.differential.conftest import AK_LIB, AK_VERSION
from kafkalike.testing.apache_kafka import ApacheKafkaNode, kafka_jvm_options
from kafkalike.testing.process_cluster import (
    COMBINED_ROLES,
    CONTROLLER_ROLE,
    KafkalikeNode,
    NodeProcess,
    ProcessCluster,
    node_properties,
    plan_addresses,
)
from kafkalike.testing.wire_client import WireClient

pytestmark = pytest.mark.differential

CONTROLLER, BROKER = 1, 2
TOPIC = "through-a-kafka-controller"
PARTITIONS = 2
PER_PARTITION = 10
CREATE_TOPICS = 19
CLIENT_TIMEOUT_S = 30
WAIT_S = 60.0


class KafkaControllerWithoutShareOrStreams(ApacheKafkaNode):
    """From Kafka 4.2, formatted with share.version and streams.version at 0: Kafka finalizes them
    above 0, and kafkalike's broker serves neither (it registers supporting level 0 only), so
    Kafka's controller would refuse its registration (UNSUPPORTED_VERSION)."""

    def format_command(self, cluster_id: str) -> list[str]:
        if AK_VERSION < (4, 2):
            return super().format_command(cluster_id)
        features = ["--feature", "share.version=0", "--feature", "streams.version=0"]
        return [*super().format_command(cluster_id), *features]


def _cluster(root: Path) -> ProcessCluster[NodeProcess]:
    controller_address, broker_address = plan_addresses(2)
    controller_dir = root / f"node-{CONTROLLER}"
    controller = KafkaControllerWithoutShareOrStreams(
        controller_address,
        controller_dir,
        node_properties(controller_address, [controller_address], controller_dir / "data", CONTROLLER_ROLE),
        Path(AK_LIB),
        kafka_jvm_options(root, "512m", "INFO"),
    )
    broker_dir = root / f"node-{BROKER}"
    properties = node_properties(broker_address, [controller_address], broker_dir / "data", COMBINED_ROLES)
    del properties["controller.quorum.voters"]
    properties.update(
        {
            "process.roles": "broker",
            "controller.quorum.bootstrap.servers": controller_address.controller,
            "listeners": f"PLAINTEXT://{broker_address.client}",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
        }
    )
    return ProcessCluster([controller, KafkalikeNode(broker_address, broker_dir, properties)])


def _produce_and_consume(bootstrap: str) -> list[str]:
    """kafka-python: PER_PARTITION values to each partition, acks=all, then every value read back."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(PER_PARTITION):
        for partition in range(PARTITIONS):
            producer.send(TOPIC, value=f"{partition}-{i}".encode(), partition=partition)
    producer.flush(CLIENT_TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=1000)
    consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    values: list[str] = []
    end = time.monotonic() + CLIENT_TIMEOUT_S
    while len(values) < PARTITIONS * PER_PARTITION and time.monotonic() < end:
        for batch in consumer.poll(timeout_ms=500).values():
            values.extend(m.value.decode() for m in batch)
    consumer.close()
    return values


def test_a_broker_with_only_bootstrap_servers_runs_on_a_kafka_controller(tmp_path: Path) -> None:
    # Started in turn: the controller first (its quorum is itself), then the broker, ready once
    # its Metadata lists it (registered with the Kafka controller and unfenced).
    with _cluster(tmp_path).start(order=[CONTROLLER, BROKER]) as cluster:
        view = cluster.describe_quorum(CONTROLLER)
        assert view is not None and view.leader_id == CONTROLLER
        assert list(view.voters) == [CONTROLLER] and BROKER in view.observers
        broker = cluster.node(BROKER)
        with WireClient(broker.address.host, broker.address.client_port) as client:
            topic = {
                "name": TOPIC,
                "num_partitions": PARTITIONS,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            created = client.request(CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 15000})
        assert created.topics[0].error_code == 0, created
        cluster.wait_for(
            lambda: cluster.partition_leaders(TOPIC, via=BROKER) == dict.fromkeys(range(PARTITIONS), BROKER),
            "the broker leading the topic's partitions",
            WAIT_S,
        )
        values = _produce_and_consume(broker.bootstrap)
        assert sorted(values) == sorted(f"{p}-{i}" for p in range(PARTITIONS) for i in range(PER_PARTITION))
        # The leader counts it an observer of the metadata log, caught up.
        view = cluster.describe_quorum(CONTROLLER)
        assert view is not None and view.observers[BROKER] >= 0
