"""What a handler gets besides the request body: a narrow context, not the broker.

A handler may touch:

- ``replicas``: the partitions (``kafkalike.replica.ReplicaManager``), ``writer`` to append to
  them (file work off the loop) and ``waiters`` to wait for them to move; ``throttles``, the
  replication throttles a follower's fetch is held to;
- ``metadata``: what this node knows of the cluster (the metadata image, this node's id and
  address, the cluster id, the broker config);
- ``controller``: the operations that change metadata: a client's admin requests forwarded to
  the active controller, producer ids, auto-creation;
- ``groups`` and ``txn``: the group and transaction coordinators;
- ``log_dirs``: the data directory as DescribeLogDirs and DeleteRecords see it;
- the request's own facts: header (and version), client host, listener and principal;
- ``clock``, and ``faults``: the test kit's fault hooks (paused partitions).

``tests/server/test_handler_context.py`` keeps handlers from reaching the broker again and
from importing ``PartitionLog``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkalike.protocol.api import RequestHeader
from kafkalike.protocol.errors import ErrorCode
from kafkalike.server.txn_service import MarkerEntry, write_markers

if TYPE_CHECKING:
    from kafkalike.controller import image as cluster
    from kafkalike.replica import ReplicaManager
    from kafkalike.server.appends import PartitionWriter
    from kafkalike.server.broker import Broker
    from kafkalike.server.clock import Clock
    from kafkalike.server.cluster_metadata import TopicsImage
    from kafkalike.server.config import BrokerConfig
    from kafkalike.server.faults import FaultInjector
    from kafkalike.server.fetch_sessions import FetchSessions
    from kafkalike.server.group_service import GroupService
    from kafkalike.server.replication import AlterPartitionSender, FollowerReads, ReplicationThrottles
    from kafkalike.server.routing import ClusterRouting
    from kafkalike.server.txn_service import TxnService
    from kafkalike.server.waiters import PartitionWaiters
    from kafkalike.txn.metadata import TopicPartition

ANONYMOUS = "User:ANONYMOUS"  # the principal of every PLAINTEXT connection, as Kafka names it
DEFAULT_LISTENER = "PLAINTEXT"


class MetadataView:
    """What this node knows of the cluster and of itself."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    @property
    def image(self) -> TopicsImage:
        return self._broker.controller.image

    @property
    def cluster_image(self) -> cluster.MetadataImage:
        """The published image of the quorum's committed metadata (brokers, partition registrations)."""
        return self._broker.publisher.image

    @property
    def node_id(self) -> int:
        return self._broker.node_id

    @property
    def cluster_id(self) -> str:
        return self._broker.cluster_id

    @property
    def advertised(self) -> tuple[str, int]:
        """(host, port) clients reach this broker at on its first client listener."""
        return self._broker.advertised

    def advertised_on(self, listener: str) -> tuple[str, int] | None:
        """(host, port) this broker advertises on ``listener``; None when it advertises none there."""
        return self._broker.advertised_listeners.get(listener)

    @property
    def config(self) -> BrokerConfig:
        return self._broker.config

    @property
    def routing(self) -> ClusterRouting:
        """Which partitions exist and who leads them (server/routing.py)."""
        return self._broker.routing

    def api_versions(self) -> list[dict[str, Any]]:
        return self._broker.api_versions()


class ControllerFacade:
    """The operations that change metadata: a client's admin requests go to the active
    controller (``forward``), producer ids come in blocks from it, auto-creation asks it."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def reserve_producer_id(self) -> None:
        await self._broker.reserve_producer_id()

    def allocate_producer_id(self) -> int:
        return self._broker.controller.allocate_producer_id()

    async def forward(self, api_key: int, version: int, request: Any) -> Any:
        """A client's CreateTopics, CreatePartitions, DeleteTopics or (Incremental)AlterConfigs
        answered by the active controller, once this broker's metadata shows what it did."""
        return await self._broker.controller.forward(api_key, version, request)

    async def forward_to_quorum(self, api_key: int, version: int, request: Any) -> Any:
        """A client's DescribeQuorum, AddRaftVoter or RemoveRaftVoter answered by the active
        controller (nothing to wait for in this broker's metadata)."""
        return await self._broker.controller.forward_to_quorum(api_key, version, request)

    def may_auto_create(self, name: str) -> bool:
        return self._broker.may_auto_create(name)

    def request_auto_create(self, names: list[str]) -> None:
        self._broker.request_auto_create(names)


class LogDirs:
    """The data directory, as DescribeLogDirs and DeleteRecords see it."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    @property
    def path(self) -> Path:
        return self._broker.data_dir

    @property
    def in_memory(self) -> bool:
        return self._broker.ephemeral

    async def checkpoint_offsets(self) -> None:
        """The checkpoint files whose offsets moved (log starts, recovery points), off the loop."""
        await self._broker.checkpoint_offsets()


class HandlerServices:
    """Everything handlers share, built once per broker; a RequestContext adds the request."""

    def __init__(self, broker: Broker) -> None:
        self.replicas: ReplicaManager = broker.replicas
        self.writer: PartitionWriter = broker.writer
        self.waiters: PartitionWaiters = broker.waiters
        self.metadata = MetadataView(broker)
        self.controller = ControllerFacade(broker)
        self.log_dirs = LogDirs(broker)
        self.groups: GroupService = broker.groups
        self.txn: TxnService = broker.txn
        self.clock: Clock = broker.clock
        self.faults: FaultInjector = broker.faults
        self.isr_changes: AlterPartitionSender = broker.isr_changes
        self.fetch_sessions: FetchSessions = broker.fetch_sessions
        self.throttles: ReplicationThrottles = broker.throttles
        self.follower_reads: FollowerReads = broker.follower_reads
        self.listener = _listener_name(broker.config.get("listeners"), broker.config.get("controller.listener.names"))
        self._broker = broker

    async def write_txn_markers(self, entries: list[MarkerEntry]) -> list[dict[TopicPartition, ErrorCode]]:
        """WriteTxnMarkers' appends (the transaction coordinator's marker path)."""
        return await write_markers(self._broker, entries)


def _listener_name(listeners: str | None, controller_names: str | None) -> str:
    """The name of the first client listener, the controller's skipped (``PLAINTEXT`` when none is configured)."""
    controller = {n.strip().upper() for n in (controller_names or "").split(",")}
    for entry in (listeners or "").split(","):
        name = entry.split("://", 1)[0].strip().upper() if "://" in entry else ""
        if name and name not in controller:
            return name
    return DEFAULT_LISTENER


@dataclass(slots=True)
class RequestContext:
    services: HandlerServices
    header: RequestHeader
    client_host: str
    listener: str = DEFAULT_LISTENER
    principal: str = ANONYMOUS

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def replicas(self) -> ReplicaManager:
        return self.services.replicas

    @property
    def writer(self) -> PartitionWriter:
        return self.services.writer

    @property
    def waiters(self) -> PartitionWaiters:
        return self.services.waiters

    @property
    def isr_changes(self) -> AlterPartitionSender:
        """Where a leader's ISR expansions go (to the controller, as AlterPartition)."""
        return self.services.isr_changes

    @property
    def fetch_sessions(self) -> FetchSessions:
        """Followers' incremental fetch sessions (KIP-227)."""
        return self.services.fetch_sessions

    @property
    def throttles(self) -> ReplicationThrottles:
        """The leader's replication throttle on followers outside the ISR (KIP-73)."""
        return self.services.throttles

    @property
    def follower_reads(self) -> FollowerReads:
        """Consumer reads served here as a follower (KIP-392)."""
        return self.services.follower_reads

    @property
    def metadata(self) -> MetadataView:
        return self.services.metadata

    @property
    def controller(self) -> ControllerFacade:
        return self.services.controller

    @property
    def log_dirs(self) -> LogDirs:
        return self.services.log_dirs

    @property
    def groups(self) -> GroupService:
        return self.services.groups

    @property
    def txn(self) -> TxnService:
        return self.services.txn

    @property
    def clock(self) -> Clock:
        return self.services.clock

    @property
    def faults(self) -> FaultInjector:
        return self.services.faults
