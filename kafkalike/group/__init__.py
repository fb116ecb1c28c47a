"""The group coordinator: classic consumer groups and committed offsets (no I/O, no clock).

``GroupCoordinator`` is a synchronous state machine driven by requests and ``poll(now_ms)``;
its durable state goes through a ``GroupStore`` into ``__consumer_offsets`` in Kafka's record
layout and comes back with ``replay``. The server wraps it in a trio adapter.
"""

from kafkalike.group.api import (
    CommitPartition,
    CommitRequest,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    FetchResult,
    JoinMember,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    ListedGroup,
    Pending,
    SyncRequest,
    SyncResult,
)
from kafkalike.group.config import GroupConfig
from kafkalike.group.coordinator import GroupCoordinator
from kafkalike.group.offsets import OffsetAndMetadata
from kafkalike.group.records import OFFSETS_TOPIC, partition_for
from kafkalike.group.state import GroupState
from kafkalike.group.store import GroupStore, LogGroupStore, StoreError, read_records

__all__ = [
    "OFFSETS_TOPIC",
    "CommitPartition",
    "CommitRequest",
    "DescribedGroup",
    "DescribedMember",
    "FetchResult",
    "FetchedOffset",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "GroupStore",
    "JoinMember",
    "JoinRequest",
    "JoinResult",
    "LeaveResult",
    "LeavingMember",
    "ListedGroup",
    "LogGroupStore",
    "OffsetAndMetadata",
    "Pending",
    "StoreError",
    "SyncRequest",
    "SyncResult",
    "partition_for",
    "read_records",
]
