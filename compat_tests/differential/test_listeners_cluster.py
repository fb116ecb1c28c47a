"""Two client listeners, on a 2-node Apache Kafka cluster and a 2-node kafkalike cluster (combined
nodes, the same process-cluster kit): every node serves PLAINTEXT and INTERNAL, node 1 advertises
both, node 2 PLAINTEXT only (INTERNAL bound, not advertised). Metadata (v0, v5, v12),
DescribeCluster and KIP-951's hints asked on each listener of each node name only that listener's
endpoints; a partition led by node 2 is LISTENER_NOT_FOUND on INTERNAL from v6 and
LEADER_NOT_AVAILABLE before, with node 2 offline (and left out of v0's replicas), alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compat_tests.differential.conftest import AK_LIB
from kafkalike.protocol.records import Record, build_batch
from kafkalike.testing.apache_kafka import ApacheKafkaNode, kafka_jvm_options
from kafkalike.testing.process_cluster import (
    KafkalikeNode,
    NodeProcess,
    ProcessCluster,
    node_properties,
    plan_addresses,
)
from kafkalike.testing.wire_client import WireClient

pytestmark = pytest.mark.differential

TOPIC = "two-listeners"
LISTENERS = ("PLAINTEXT", "INTERNAL")
METADATA, PRODUCE, CREATE_TOPICS, DESCRIBE_CLUSTER = 3, 0, 19, 60


def _cluster(root: Path, kafka: bool) -> ProcessCluster[NodeProcess]:
    addresses = plan_addresses(2, extra_listeners=["INTERNAL"])
    jvm_options = kafka_jvm_options(root, "512m", "WARN") if kafka else []
    members: list[NodeProcess] = []
    for address in addresses:
        node_dir = root / f"node-{address.node_id}"
        properties = node_properties(address, addresses, node_dir / "data")
        if address.node_id == 2:
            properties["advertised.listeners"] = f"PLAINTEXT://{address.client}"
        if kafka:
            members.append(ApacheKafkaNode(address, node_dir, properties, Path(AK_LIB), jvm_options))
        else:
            members.append(KafkalikeNode(address, node_dir, properties))
    return ProcessCluster(members)


def _where(cluster: ProcessCluster[NodeProcess]) -> dict[tuple[str, int], str]:
    """host:port -> what it names (node id and listener), to compare clusters on different ports."""
    return {
        (node.address.host, int(node.address.on(name).rsplit(":", 1)[1])): f"node {node.node_id} {name}"
        for node in (cluster.node(1), cluster.node(2))
        for name in LISTENERS
    }


def _produce(partition: int) -> dict[str, Any]:
    records = build_batch([Record(value=b"misrouted")])
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}],
    }


def _answers(cluster: ProcessCluster[NodeProcess]) -> dict[str, Any]:
    """Each node's answers on each listener, ports replaced by what they name."""
    where = _where(cluster)

    def named(host: str, port: int) -> str:
        return where.get((host, port), f"{host}:{port}?")

    with WireClient(cluster.node(1).address.host, cluster.node(1).address.client_port) as client:
        created = client.request(
            CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": TOPIC,
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [
                            {"partition_index": 0, "broker_ids": [1]},
                            {"partition_index": 1, "broker_ids": [2]},
                        ],
                        "configs": [],
                    }
                ],
                "timeout_ms": 15000,
            },
        )
    assert created.topics[0].error_code == 0, created
    for via in (1, 2):
        cluster.wait_for(lambda v=via: cluster.partition_leaders(TOPIC, via=v) == {0: 1, 1: 2}, "leaders")
    answers: dict[str, Any] = {}
    for node_id in (1, 2):
        for listener in LISTENERS:
            host, port = cluster.node(node_id).address.on(listener).rsplit(":", 1)
            with WireClient(host, int(port)) as client:
                for version in (0, 5, 12):
                    body: dict[str, Any] = {"topics": [{"name": TOPIC}]}
                    if version >= 4:
                        body["allow_auto_topic_creation"] = False
                    metadata = client.request(METADATA, version, body)
                    answers[f"node {node_id} {listener} metadata v{version}"] = {
                        "brokers": sorted((b.node_id, named(b.host, b.port)) for b in metadata.brokers),
                        "partitions": sorted(
                            (
                                p.partition_index,
                                p.error_code,
                                p.leader_id,
                                list(p.replica_nodes),
                                list(p.isr_nodes),
                                list(p.offline_replicas) if version >= 5 else None,
                            )
                            for t in metadata.topics
                            for p in t.partitions
                        ),
                    }
                described = client.request(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
                answers[f"node {node_id} {listener} describe cluster"] = sorted(
                    (b.broker_id, named(b.host, b.port)) for b in described.brokers
                )
                # The partition the other node leads: NOT_LEADER_OR_FOLLOWER with KIP-951's hint.
                produced = client.request(PRODUCE, 12, _produce(1 if node_id == 1 else 0))
                p = produced.responses[0].partition_responses[0]
                answers[f"node {node_id} {listener} produce hint"] = (
                    p.error_code,
                    p.current_leader.leader_id,
                    sorted((n.node_id, named(n.host, n.port)) for n in produced.node_endpoints),
                )
    return answers


def test_each_listener_is_answered_with_its_own_endpoints(tmp_path: Path) -> None:
    with _cluster(tmp_path / "kafka", kafka=True) as kafka:
        expected = _answers(kafka)
    with _cluster(tmp_path / "kafkalike", kafka=False) as kafkalike:
        found = _answers(kafkalike)
    # What the scenario is about, on Kafka: INTERNAL lists node 1 only, and node 2's partition
    # there has no leader it can name.
    assert expected["node 1 INTERNAL metadata v12"]["brokers"] == [(1, "node 1 INTERNAL")]
    assert expected["node 1 INTERNAL metadata v12"]["partitions"][1][1:3] == (72, -1)  # LISTENER_NOT_FOUND
    assert expected["node 1 INTERNAL metadata v5"]["partitions"][1][1:3] == (5, -1)  # LEADER_NOT_AVAILABLE
    assert expected["node 1 PLAINTEXT metadata v12"]["brokers"] == [(1, "node 1 PLAINTEXT"), (2, "node 2 PLAINTEXT")]
    differing = {k: (expected[k], found.get(k)) for k in expected if expected[k] != found.get(k)}
    assert not differing, "kafkalike differs from Apache Kafka:\n" + "\n".join(
        f"{k}: kafka {a} / kafkalike {b}" for k, (a, b) in differing.items()
    )
