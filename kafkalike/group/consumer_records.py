"""The KIP-848 consumer group records of ``__consumer_offsets``, in Apache Kafka's layout.

Like the classic records (records.py), a key is an int16 version followed by the fields of a
``data`` spec, and so is a value; a null value is a tombstone. The key version names the
record type:

- 3 ConsumerGroupMetadata: the group epoch;
- 4 ConsumerGroupPartitionMetadata: id and partition count of every subscribed topic;
- 5 ConsumerGroupMemberMetadata: one member's subscription and identity;
- 6 ConsumerGroupTargetAssignmentMetadata: the epoch of the target assignment;
- 7 ConsumerGroupTargetAssignmentMember: one member's target partitions;
- 8 ConsumerGroupCurrentMemberAssignment: one member's epoch, state and owned partitions.

Values are written at version 0 (flexible), the only one Kafka defines. Each record decodes
into a frozen dataclass below; ``ConsumerMembership`` applies them the same way whether they
were just written or are read back at start-up.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafkalike.group.assignors import Assignment
from kafkalike.log.coordinator_log import CoordinatorRecord, decode_versioned, encode_versioned, key_version
from kafkalike.protocol.codec import Message

GROUP_EPOCH_KEY = 3
PARTITION_METADATA_KEY = 4
MEMBER_METADATA_KEY = 5
TARGET_EPOCH_KEY = 6
TARGET_MEMBER_KEY = 7
CURRENT_ASSIGNMENT_KEY = 8
VALUE_VERSION = 0


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True)
class MemberSubscription:
    """What a ConsumerGroupMemberMetadataValue holds."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: frozenset[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True)
class CurrentAssignment:
    """What a ConsumerGroupCurrentMemberAssignmentValue holds."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


@dataclass(frozen=True)
class GroupEpochRecord:
    group_id: str
    epoch: int | None


@dataclass(frozen=True)
class PartitionMetadataRecord:
    group_id: str
    topics: tuple[TopicMetadata, ...] | None


@dataclass(frozen=True)
class MemberSubscriptionRecord:
    group_id: str
    member_id: str
    subscription: MemberSubscription | None


@dataclass(frozen=True)
class TargetEpochRecord:
    group_id: str
    epoch: int | None


@dataclass(frozen=True)
class TargetMemberRecord:
    group_id: str
    member_id: str
    assignment: Assignment | None


@dataclass(frozen=True)
class CurrentAssignmentRecord:
    group_id: str
    member_id: str
    current: CurrentAssignment | None


ConsumerRecord = (
    GroupEpochRecord
    | PartitionMetadataRecord
    | MemberSubscriptionRecord
    | TargetEpochRecord
    | TargetMemberRecord
    | CurrentAssignmentRecord
)

_SPECS = {
    GROUP_EPOCH_KEY: "ConsumerGroupMetadata",
    PARTITION_METADATA_KEY: "ConsumerGroupPartitionMetadata",
    MEMBER_METADATA_KEY: "ConsumerGroupMemberMetadata",
    TARGET_EPOCH_KEY: "ConsumerGroupTargetAssignmentMetadata",
    TARGET_MEMBER_KEY: "ConsumerGroupTargetAssignmentMember",
    CURRENT_ASSIGNMENT_KEY: "ConsumerGroupCurrentMemberAssignment",
}


def _partitions(assignment: Assignment) -> list[dict[str, object]]:
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items()) if ps]


def _assignment(entries: Iterable[Message]) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for entry in entries:
        if entry.partitions:
            out[entry.topic_id] = out.get(entry.topic_id, frozenset()) | frozenset(entry.partitions)
    return out


def _key(record: ConsumerRecord) -> bytes:
    if isinstance(record, GroupEpochRecord):
        return encode_versioned("ConsumerGroupMetadataKey", GROUP_EPOCH_KEY, {"group_id": record.group_id})
    if isinstance(record, PartitionMetadataRecord):
        return encode_versioned(
            "ConsumerGroupPartitionMetadataKey", PARTITION_METADATA_KEY, {"group_id": record.group_id}
        )
    if isinstance(record, TargetEpochRecord):
        return encode_versioned(
            "ConsumerGroupTargetAssignmentMetadataKey", TARGET_EPOCH_KEY, {"group_id": record.group_id}
        )
    version = {MemberSubscriptionRecord: MEMBER_METADATA_KEY, TargetMemberRecord: TARGET_MEMBER_KEY}.get(
        type(record), CURRENT_ASSIGNMENT_KEY
    )
    return encode_versioned(
        _SPECS[version] + "Key", version, {"group_id": record.group_id, "member_id": record.member_id}
    )


def _value(record: ConsumerRecord) -> bytes | None:
    body: dict[str, object]
    if isinstance(record, GroupEpochRecord):
        if record.epoch is None:
            return None
        return encode_versioned("ConsumerGroupMetadataValue", VALUE_VERSION, {"epoch": record.epoch})
    if isinstance(record, TargetEpochRecord):
        if record.epoch is None:
            return None
        return encode_versioned(
            "ConsumerGroupTargetAssignmentMetadataValue", VALUE_VERSION, {"assignment_epoch": record.epoch}
        )
    if isinstance(record, PartitionMetadataRecord):
        if record.topics is None:
            return None
        topics = [
            {"topic_id": t.topic_id, "topic_name": t.name, "num_partitions": t.partitions, "partition_metadata": []}
            for t in sorted(record.topics, key=lambda t: t.name)
        ]
        return encode_versioned("ConsumerGroupPartitionMetadataValue", VALUE_VERSION, {"topics": topics})
    if isinstance(record, MemberSubscriptionRecord):
        s = record.subscription
        if s is None:
            return None
        body = {
            "instance_id": s.instance_id,
            "rack_id": s.rack_id,
            "client_id": s.client_id,
            "client_host": s.client_host,
            "subscribed_topic_names": sorted(s.subscribed_topic_names),
            "subscribed_topic_regex": s.subscribed_topic_regex,
            "rebalance_timeout_ms": s.rebalance_timeout_ms,
            "server_assignor": s.server_assignor,
            "classic_member_metadata": None,
        }
        return encode_versioned("ConsumerGroupMemberMetadataValue", VALUE_VERSION, body)
    if isinstance(record, TargetMemberRecord):
        if record.assignment is None:
            return None
        body = {"topic_partitions": _partitions(record.assignment)}
        return encode_versioned("ConsumerGroupTargetAssignmentMemberValue", VALUE_VERSION, body)
    c = record.current
    if c is None:
        return None
    body = {
        "member_epoch": c.member_epoch,
        "previous_member_epoch": c.previous_member_epoch,
        "state": c.state,
        "assigned_partitions": _partitions(c.assigned),
        "partitions_pending_revocation": _partitions(c.pending_revocation),
    }
    return encode_versioned("ConsumerGroupCurrentMemberAssignmentValue", VALUE_VERSION, body)


def encode_record(record: ConsumerRecord) -> CoordinatorRecord:
    return _key(record), _value(record)


def decode_record(key: bytes, value: bytes | None) -> ConsumerRecord | None:
    """The consumer group record a key/value pair holds; None for other record types."""
    version = key_version(key)
    spec = _SPECS.get(version)
    if spec is None:
        return None
    _, k = decode_versioned(spec + "Key", key)
    v = None if value is None else decode_versioned(spec + "Value", value)[1]
    gid = k.group_id
    if version == GROUP_EPOCH_KEY:
        return GroupEpochRecord(gid, None if v is None else v.epoch)
    if version == TARGET_EPOCH_KEY:
        return TargetEpochRecord(gid, None if v is None else v.assignment_epoch)
    if version == PARTITION_METADATA_KEY:
        topics = (
            None if v is None else tuple(TopicMetadata(t.topic_id, t.topic_name, t.num_partitions) for t in v.topics)
        )
        return PartitionMetadataRecord(gid, topics)
    if version == MEMBER_METADATA_KEY:
        return MemberSubscriptionRecord(gid, k.member_id, None if v is None else _subscription(v))
    if version == TARGET_MEMBER_KEY:
        return TargetMemberRecord(gid, k.member_id, None if v is None else _assignment(v.topic_partitions))
    current = None
    if v is not None:
        current = CurrentAssignment(
            member_epoch=v.member_epoch,
            previous_member_epoch=v.previous_member_epoch,
            state=v.state,
            assigned=_assignment(v.assigned_partitions),
            pending_revocation=_assignment(v.partitions_pending_revocation),
        )
    return CurrentAssignmentRecord(gid, k.member_id, current)


def _subscription(v: Message) -> MemberSubscription:
    return MemberSubscription(
        instance_id=v.instance_id,
        rack_id=v.rack_id,
        client_id=v.client_id,
        client_host=v.client_host,
        subscribed_topic_names=frozenset(v.subscribed_topic_names),
        subscribed_topic_regex=v.subscribed_topic_regex or None,
        rebalance_timeout_ms=v.rebalance_timeout_ms,
        server_assignor=v.server_assignor,
    )
