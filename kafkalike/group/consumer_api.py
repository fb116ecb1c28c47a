"""What goes into the KIP-848 consumer group coordinator and what comes out.

Like api.py for classic groups: plain frozen dataclasses that the ConsumerGroupHeartbeat and
ConsumerGroupDescribe handlers translate from and to wire messages. Partitions travel as
``(topic_id, partitions)`` pairs, as on the wire.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafkalike.protocol.errors import ErrorCode

TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


@dataclass(frozen=True)
class ConsumerHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    # -1, and None for the optional fields below, mean "unchanged since the last heartbeat".
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: TopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    # ConsumerGroupHeartbeat v1+ (KIP-1082): the member makes up its id before it joins.
    member_id_required: bool = False


@dataclass(frozen=True)
class ConsumerHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None when the member's assignment did not change (and the request was not a full one).
    assignment: TopicPartitions | None = None


@dataclass(frozen=True)
class DescribedPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedPartitions, ...]
    target_assignment: tuple[DescribedPartitions, ...]


@dataclass(frozen=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
