"""Single requests to one node of a process cluster, each on a connection of its own, that answer
what the cluster kit asks (``kafkalike.testing.process_cluster``): who Metadata lists, who leads a
partition, what DescribeQuorum says, whether a CreateTopics succeeds. A node that does not answer
within the timeout is an empty answer, not an exception (but for CreateTopics).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kafkalike.testing.wire_client import WireClient

HOST = "127.0.0.1"
METADATA_TOPIC = "__cluster_metadata"
PROBE_TIMEOUT_S = 2.0
ZERO_UUID = uuid.UUID(int=0)

API_METADATA, API_CREATE_TOPICS, API_DESCRIBE_QUORUM = 3, 19, 55
METADATA_VERSION, CREATE_TOPICS_VERSION, DESCRIBE_QUORUM_VERSION = 12, 7, 2


@dataclass(frozen=True)
class NodeAddress:
    """Where one node listens: its client (PLAINTEXT) port, its controller (CONTROLLER) port,
    and the ports of any more client listeners (name, port), PLAINTEXT as well."""

    node_id: int
    client_port: int
    controller_port: int
    host: str = HOST
    listener_ports: tuple[tuple[str, int], ...] = ()

    @property
    def client(self) -> str:
        return f"{self.host}:{self.client_port}"

    def on(self, listener: str) -> str:
        """host:port of client listener ``listener`` (PLAINTEXT or one of ``listener_ports``)."""
        if listener == "PLAINTEXT":
            return self.client
        return f"{self.host}:{dict(self.listener_ports)[listener]}"

    @property
    def controller(self) -> str:
        return f"{self.host}:{self.controller_port}"


@dataclass(frozen=True)
class QuorumView:
    """What DescribeQuorum says of the metadata partition, asked of one node."""

    asked: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: Mapping[int, int]  # voter id -> log end offset, as the leader last saw it
    observers: Mapping[int, int]


def metadata_brokers(address: NodeAddress, timeout_s: float = PROBE_TIMEOUT_S) -> set[int]:
    """The broker ids in a Metadata response from ``address``'s client port; empty if it does not answer."""
    try:
        with WireClient(address.host, address.client_port, timeout_s=timeout_s) as client:
            response = client.request(
                API_METADATA, METADATA_VERSION, {"topics": [], "allow_auto_topic_creation": False}
            )
    except (OSError, ConnectionError, ValueError):
        return set()
    return {broker.node_id for broker in response.brokers}


def partition_leaders(address: NodeAddress, topic: str, timeout_s: float = PROBE_TIMEOUT_S) -> dict[int, int]:
    body = {"topics": [{"name": topic, "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False}
    try:
        with WireClient(address.host, address.client_port, timeout_s=timeout_s) as client:
            response = client.request(API_METADATA, METADATA_VERSION, body)
    except (OSError, ConnectionError, ValueError):
        return {}
    return {p.partition_index: p.leader_id for t in response.topics if t.name == topic for p in t.partitions}


def partition_isrs(address: NodeAddress, topic: str, timeout_s: float = PROBE_TIMEOUT_S) -> dict[int, tuple[int, ...]]:
    """Each partition's ISR as the node's Metadata lists it (empty when the node does not answer)."""
    body = {"topics": [{"name": topic, "topic_id": ZERO_UUID}], "allow_auto_topic_creation": False}
    try:
        with WireClient(address.host, address.client_port, timeout_s=timeout_s) as client:
            response = client.request(API_METADATA, METADATA_VERSION, body)
    except (OSError, ConnectionError, ValueError):
        return {}
    return {
        p.partition_index: tuple(sorted(p.isr_nodes)) for t in response.topics if t.name == topic for p in t.partitions
    }


def quorum_answers(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether host:port answers a DescribeQuorum request at all (an error included)."""
    body = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
    try:
        with WireClient(host, port, timeout_s=timeout_s) as client:
            client.request(API_DESCRIBE_QUORUM, DESCRIBE_QUORUM_VERSION, body)
    except (OSError, ConnectionError, ValueError):
        return False
    return True


def describe_quorum(asked: int, host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> QuorumView | None:
    """DescribeQuorum of ``__cluster_metadata-0`` at host:port; None when it fails or answers an error."""
    body = {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}
    try:
        with WireClient(host, port, timeout_s=timeout_s) as client:
            response = client.request(API_DESCRIBE_QUORUM, DESCRIBE_QUORUM_VERSION, body)
    except (OSError, ConnectionError, ValueError):
        return None
    if response.error_code != 0 or not response.topics or not response.topics[0].partitions:
        return None
    partition = response.topics[0].partitions[0]
    if partition.error_code != 0:
        return None
    return QuorumView(
        asked=asked,
        leader_id=partition.leader_id,
        leader_epoch=partition.leader_epoch,
        high_watermark=partition.high_watermark,
        voters={v.replica_id: v.log_end_offset for v in partition.current_voters},
        observers={o.replica_id: o.log_end_offset for o in partition.observers},
    )


def create_topic(
    address: NodeAddress, name: str, partitions: int, replication_factor: int, timeout_ms: int = 10000
) -> int:
    """CreateTopics of one topic at ``address``'s client port: its error code (raises OSError when
    the node does not answer within the request's timeout)."""
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication_factor,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": timeout_ms,
        "validate_only": False,
    }
    with WireClient(address.host, address.client_port, timeout_s=timeout_ms / 1000 + 5) as client:
        response = client.request(API_CREATE_TOPICS, CREATE_TOPICS_VERSION, body)
    return int(response.topics[0].error_code)
