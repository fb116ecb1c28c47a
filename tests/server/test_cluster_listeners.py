"""A 3-node cluster whose nodes each serve two client listeners (PLAINTEXT and INTERNAL, the
inter-broker one): every node registers both, and a client bootstrapped on either listener is
told only that listener's addresses (Metadata, DescribeCluster, FindCoordinator), so it stays on
it; the inter-broker client reaches the others on INTERNAL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkalike.testing.cluster import Cluster, NodeThread
from kafkalike.testing.wire_client import WireClient

LISTENERS = ("PLAINTEXT", "INTERNAL")
METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 3, 10, 60
WAIT_S = 30.0
COORDINATOR_NOT_AVAILABLE = 15


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    overrides = {"inter.broker.listener.name": "INTERNAL"}
    with Cluster(brokers=3, extra_listeners=["INTERNAL"], overrides=overrides) as running:
        running.create_topic("orders", partitions=6)
        yield running
    assert running.logged_errors == []


def _threads(cluster: Cluster) -> list[NodeThread]:
    return [n for n in cluster.brokers if isinstance(n, NodeThread)]


def _ask(address: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    host, port = address.rsplit(":", 1)
    with WireClient(host, int(port)) as client:
        return client.request(api_key, version, body)


def _coordinator(address: str, group: str) -> Any:
    """FindCoordinator's answer once it has one: the first ones make __consumer_offsets, and are
    COORDINATOR_NOT_AVAILABLE until its leaders are known, as Kafka's."""
    deadline = time.monotonic() + WAIT_S
    while True:
        (found,) = _ask(address, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators
        if found.error_code != COORDINATOR_NOT_AVAILABLE or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _addresses(cluster: Cluster, listener: str) -> dict[int, str]:
    return {n.node_id: n.address.on(listener) for n in _threads(cluster)}


@pytest.mark.parametrize("listener", LISTENERS)
def test_every_node_answers_with_the_addresses_of_the_listener_asked_on(cluster: Cluster, listener: str) -> None:
    expected = _addresses(cluster, listener)
    other = _addresses(cluster, "INTERNAL" if listener == "PLAINTEXT" else "PLAINTEXT")
    assert not set(expected.values()) & set(other.values())  # the two listeners are told apart by port
    for node_id, address in expected.items():
        metadata = _ask(address, METADATA, 12, {"topics": [{"name": "orders"}], "allow_auto_topic_creation": False})
        assert {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers} == expected, (node_id, listener)
        leaders = {p.leader_id for p in metadata.topics[0].partitions}
        assert all(p.error_code == 0 for p in metadata.topics[0].partitions) and leaders <= set(expected)
        described = _ask(address, DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
        assert {b.broker_id: f"{b.host}:{b.port}" for b in described.brokers} == expected
        coordinator = _coordinator(address, f"group-{listener}")
        assert coordinator.error_code == 0 and f"{coordinator.host}:{coordinator.port}" == expected[coordinator.node_id]


@pytest.mark.parametrize("listener", LISTENERS)
def test_a_client_bootstrapped_on_one_listener_produces_and_consumes_across_the_brokers(
    cluster: Cluster, listener: str
) -> None:
    bootstrap = cluster.bootstrap_servers_on(listener)
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        for partition in range(6):
            producer.send("orders", value=f"{listener}-{partition}".encode(), partition=partition).get(timeout=WAIT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000, group_id=None
    )
    try:
        consumer.assign([TopicPartition("orders", p) for p in range(6)])
        seen = {m.value.decode() for m in consumer if m.value.decode().startswith(f"{listener}-")}
        assert seen == {f"{listener}-{p}" for p in range(6)}
        # The brokers the client was told of (kafka-python's cluster view) are on its own listener.
        ports = {int(a.rsplit(":", 1)[1]) for a in _addresses(cluster, listener).values()}
        assert {b.port for b in consumer._client.cluster.brokers()} == ports
    finally:
        consumer.close()


def test_each_node_registers_both_listeners_the_inter_broker_one_first(cluster: Cluster) -> None:
    for thread in _threads(cluster):
        node = thread.node
        assert node is not None and node.broker is not None
        image = node.broker.publisher.image
        for other in _threads(cluster):
            registration = image.brokers[other.node_id]
            assert [e.name for e in registration.listeners] == ["INTERNAL", "PLAINTEXT"]
            assert {e.name: f"{e.host}:{e.port}" for e in registration.listeners} == {
                name: other.address.on(name) for name in LISTENERS
            }
        # Transaction markers to another broker's partitions go to its INTERNAL endpoint.
        inter_broker = node.broker.txn.inter_broker
        assert inter_broker is not None
        for other in _threads(cluster):
            if other.node_id != thread.node_id:
                endpoint = inter_broker.endpoint(other.node_id)
                assert endpoint is not None and f"{endpoint.host}:{endpoint.port}" == other.address.on("INTERNAL")
