"""Requests for partitions this broker does not lead: which error, and where the leader is.

Kafka's ReplicaManager.getPartitionOrError decides the error: a partition hosted here is
served (its own checks then answer NOT_LEADER_OR_FOLLOWER on a follower); one this broker should
host but could not open (its log directory failing) is KAFKA_STORAGE_ERROR; one the metadata
knows but this broker does not host is NOT_LEADER_OR_FOLLOWER, so that the client refreshes
its metadata and goes to the leader; one the metadata does not know is
UNKNOWN_TOPIC_OR_PARTITION.

KIP-951's hints (Produce v10+, Fetch v16+): a partition answered NOT_LEADER_OR_FOLLOWER (and,
for Fetch, FENCED_LEADER_EPOCH) carries ``current_leader`` (leader id and epoch: the local
replica's view when it is hosted here, else the metadata's, else -1/-1), and the response lists
the endpoint of each such leader that is alive (registered and unfenced) on the listener the
request came in on (Kafka's getCurrentLeader and getAliveBrokerNode).

Where the cluster is described comes from ``ClusterRouting``: ``ImageRouting`` over the broker's
published metadata image.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kafkalike.protocol.errors import ErrorCode
from kafkalike.replica import Partition

if TYPE_CHECKING:
    from kafkalike.controller.image import MetadataImage
    from kafkalike.server.context import RequestContext

NO_LEADER = -1
NO_EPOCH = -1


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "host": self.host, "port": self.port, "rack": self.rack}


class ClusterRouting(Protocol):
    """What routing needs of the cluster's metadata."""

    def knows(self, topic: str, index: int) -> bool:
        """Whether the metadata has this partition (Kafka's metadataCache.contains)."""
        ...

    def leader_of(self, topic: str, index: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) as the metadata has them; None for an unknown partition."""
        ...

    def alive_endpoint(self, broker_id: int, listener: str) -> NodeEndpoint | None:
        """The broker's endpoint on ``listener`` if it is registered and unfenced."""
        ...


class ImageRouting:
    """Routing from a cluster metadata image (``image()`` gives the one published now)."""

    def __init__(self, image: Callable[[], MetadataImage]) -> None:
        self._image = image

    def knows(self, topic: str, index: int) -> bool:
        found = self._image().topics_by_name.get(topic)
        return found is not None and index in found.partitions

    def leader_of(self, topic: str, index: int) -> tuple[int, int] | None:
        found = self._image().topics_by_name.get(topic)
        partition = None if found is None else found.partitions.get(index)
        return None if partition is None else (partition.leader, partition.leader_epoch)

    def alive_endpoint(self, broker_id: int, listener: str) -> NodeEndpoint | None:
        broker = self._image().brokers.get(broker_id)
        if broker is None or broker.fenced:
            return None
        for endpoint in broker.listeners:
            if endpoint.name == listener:
                return NodeEndpoint(broker_id, endpoint.host, endpoint.port, broker.rack)
        return None


def partition_or_error(ctx: RequestContext, topic: str | None, index: int) -> Partition | ErrorCode:
    """The hosted partition, or the error Kafka's getPartitionOrError answers for it."""
    partition = ctx.replicas.get((topic, index)) if topic is not None else None
    if partition is not None:
        return partition
    if topic is not None and ctx.replicas.is_offline((topic, index)):
        return ErrorCode.KAFKA_STORAGE_ERROR
    if topic is not None and ctx.metadata.routing.knows(topic, index):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class LeaderHints:
    """KIP-951's hints of one response: ``current_leader`` per partition, the leaders' endpoints."""

    def __init__(self, ctx: RequestContext) -> None:
        self._ctx = ctx
        self._nodes: dict[int, NodeEndpoint] = {}

    def current_leader(self, topic: str, index: int) -> dict[str, int]:
        ctx = self._ctx
        partition = ctx.replicas.get((topic, index))
        if partition is not None:
            leader: tuple[int, int] | None = (partition.leader_id, partition.leader_epoch)
        else:
            leader = ctx.metadata.routing.leader_of(topic, index)
        leader_id, leader_epoch = leader if leader is not None else (NO_LEADER, NO_EPOCH)
        node = ctx.metadata.routing.alive_endpoint(leader_id, ctx.listener) if leader_id >= 0 else None
        if node is not None:
            self._nodes[node.node_id] = node
        return {"leader_id": leader_id, "leader_epoch": leader_epoch}

    def node_endpoints(self) -> list[dict[str, Any]]:
        return [n.to_wire() for _, n in sorted(self._nodes.items())]
