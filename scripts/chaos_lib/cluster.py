"""The 3-node cluster of a chaos run, Apache Kafka's or kafkalike's, each node a real process in a
network namespace of its own (``chaos_lib.network``), broker and controller, listening on its own
address with the same ports (9092 for clients, 9093 for the controllers).

The nodes are those of ``kafkalike.testing``'s process clusters, started through ``ip netns exec``:
the cluster kit's requests (Metadata, DescribeQuorum) reach them at their namespace's address.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chaos_lib.network import NodeNetwork
from kafkalike.testing.apache_kafka import ApacheKafkaNode, kafka_jvm_options
from kafkalike.testing.cluster_requests import NodeAddress
from kafkalike.testing.process_cluster import (
    BROKER_ROLE,
    COMBINED_ROLES,
    KafkalikeNode,
    ProcessCluster,
    node_properties,
)

CLIENT_PORT, CONTROLLER_PORT = 9092, 9093
Cluster = ProcessCluster[Any]


class NamespacedKafkaNode(ApacheKafkaNode):
    def __init__(self, network: NodeNetwork, *args: Any) -> None:
        super().__init__(*args)
        self.network = network

    def serve_command(self) -> list[str]:
        return self.network.wrap(self.node_id, super().serve_command())


class NamespacedKafkalikeNode(KafkalikeNode):
    def __init__(self, network: NodeNetwork, *args: Any) -> None:
        super().__init__(*args)
        self.network = network

    def serve_command(self) -> list[str]:
        return self.network.wrap(self.node_id, super().serve_command())


def kafka_defaults(nodes: int) -> dict[str, str]:
    """What ApacheKafkaCluster gives a combined node: internal topics replicated on every node."""
    return {
        "offsets.topic.replication.factor": str(min(3, nodes)),
        "transaction.state.log.replication.factor": str(min(3, nodes)),
        "transaction.state.log.min.isr": str(min(2, nodes)),
        "share.coordinator.state.topic.replication.factor": str(min(3, nodes)),
        "share.coordinator.state.topic.min.isr": str(min(2, nodes)),
        "group.initial.rebalance.delay.ms": "0",
    }


def build_cluster(
    target: str,
    network: NodeNetwork,
    data_dir: Path,
    overrides: Mapping[str, str],
    *,
    kafka_lib: Path | None = None,
    root: Path | None = None,
    voters: Sequence[int] | None = None,
) -> Cluster:
    """``target`` ``kafka`` (jars from ``kafka_lib``) or ``kafkalike`` (the tree at ``root``): a
    combined node for each of ``voters`` (every node of ``network`` by default)."""
    ids = list(network.node_ids if voters is None else voters)
    addresses = [NodeAddress(n, CLIENT_PORT, CONTROLLER_PORT, host=network.address(n)) for n in ids]
    members = [
        _node(target, network, data_dir, address, addresses, COMBINED_ROLES, overrides, kafka_lib, root)
        for address in addresses
    ]
    return ProcessCluster(members, ready_timeout_s=180.0)


def build_broker(
    target: str,
    network: NodeNetwork,
    data_dir: Path,
    node_id: int,
    cluster: Cluster,
    overrides: Mapping[str, str],
    *,
    kafka_lib: Path | None = None,
    root: Path | None = None,
) -> Any:
    """A broker-only node ``node_id`` for ``cluster`` (its voters the cluster's nodes), not started."""
    address = NodeAddress(node_id, CLIENT_PORT, CONTROLLER_PORT, host=network.address(node_id))
    voters = [node.address for node in cluster.nodes if node.is_voter]
    return _node(target, network, data_dir, address, voters, BROKER_ROLE, overrides, kafka_lib, root)


def _node(
    target: str,
    network: NodeNetwork,
    data_dir: Path,
    address: NodeAddress,
    voters: Sequence[NodeAddress],
    roles: str,
    overrides: Mapping[str, str],
    kafka_lib: Path | None,
    root: Path | None,
) -> Any:
    node_dir = data_dir / f"node-{address.node_id}"
    properties = node_properties(address, voters, node_dir / "data", roles)
    if target == "kafka":
        properties.update(kafka_defaults(len(voters)))
    properties.update(overrides)
    if target == "kafka":
        if kafka_lib is None:
            raise ValueError("the kafka target needs its jars")
        jvm_options = kafka_jvm_options(data_dir, "512m", "WARN")
        return NamespacedKafkaNode(network, address, node_dir, properties, kafka_lib, jvm_options)
    env = {"PYTHONPATH": str(root)} if root is not None else {}
    return NamespacedKafkalikeNode(network, address, node_dir, properties, env)
