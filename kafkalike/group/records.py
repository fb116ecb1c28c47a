"""The records of ``__consumer_offsets``, in Apache Kafka's layout, so the topic reads the same.

Every record's key and value are an int16 version followed by the fields of a ``data`` spec
(``protocol_specs/offset_commit_key.kspec`` and friends), encoded with the project's codec:

- key version 0 or 1: OffsetCommitKey (group, topic, partition), value OffsetCommitValue;
- key version 2: GroupMetadataKey (group), value GroupMetadataValue;
- a null value is a tombstone: the offset, or the whole group, is gone.

Values are written at the newest non-flexible version Kafka also writes (OffsetCommitValue v3,
or v1 when an explicit expiry is set; GroupMetadataValue v3) and read at any version 0-4. Key
versions above 2 belong to other coordinators' records (KIP-848 groups...) and are skipped.

A group lives in partition ``abs(hash(group_id)) % partitions`` of the topic, with Java's
String.hashCode, so the layout matches Kafka's for the same partition count.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalike.group.offsets import OffsetAndMetadata
from kafkalike.log.coordinator_log import CoordinatorRecord as CoordinatorRecord
from kafkalike.log.coordinator_log import RecordError as RecordError
from kafkalike.log.coordinator_log import decode_versioned, encode_versioned, key_version
from kafkalike.log.coordinator_log import java_string_hash as java_string_hash
from kafkalike.log.coordinator_log import partition_for as partition_for

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(frozen=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSnapshot:
    """What a GroupMetadataValue holds: a classic group after a rebalance."""

    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int | None
    members: tuple[MemberSnapshot, ...]


@dataclass(frozen=True)
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    offset: OffsetAndMetadata | None


@dataclass(frozen=True)
class GroupRecord:
    group_id: str
    group: GroupSnapshot | None


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    body = {"group": group_id, "topic": topic, "partition": partition}
    return encode_versioned("OffsetCommitKey", OFFSET_COMMIT_KEY_VERSION, body)


def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    version = (
        OFFSET_COMMIT_VALUE_VERSION if offset.expire_timestamp_ms is None else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    )
    body = {
        "offset": offset.committed_offset,
        "leader_epoch": offset.leader_epoch,
        "metadata": offset.metadata,
        "commit_timestamp": offset.commit_timestamp_ms,
        "expire_timestamp": -1 if offset.expire_timestamp_ms is None else offset.expire_timestamp_ms,
    }
    return encode_versioned("OffsetCommitValue", version, body)


def group_metadata_key(group_id: str) -> bytes:
    return encode_versioned("GroupMetadataKey", GROUP_METADATA_KEY_VERSION, {"group": group_id})


def group_metadata_value(group: GroupSnapshot) -> bytes:
    body = {
        "protocol_type": group.protocol_type,
        "generation": group.generation_id,
        "protocol": group.protocol_name,
        "leader": group.leader_id,
        "current_state_timestamp": -1 if group.state_timestamp_ms is None else group.state_timestamp_ms,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms,
                "subscription": m.subscription,
                "assignment": m.assignment,
            }
            for m in group.members
        ],
    }
    return encode_versioned("GroupMetadataValue", GROUP_METADATA_VALUE_VERSION, body)


def offset_commit_record(group_id: str, topic: str, partition: int, offset: OffsetAndMetadata) -> CoordinatorRecord:
    return offset_commit_key(group_id, topic, partition), offset_commit_value(offset)


def offset_tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return offset_commit_key(group_id, topic, partition), None


def group_metadata_record(group_id: str, group: GroupSnapshot) -> CoordinatorRecord:
    return group_metadata_key(group_id), group_metadata_value(group)


def group_tombstone(group_id: str) -> CoordinatorRecord:
    return group_metadata_key(group_id), None


def decode_record(key: bytes | None, value: bytes | None) -> OffsetRecord | GroupRecord | None:
    """The record a key/value pair of the offsets topic holds; None for other record types."""
    version = key_version(key)
    assert key is not None  # key_version refuses a null key
    if version in (0, 1):
        _, k = decode_versioned("OffsetCommitKey", key)
        return OffsetRecord(k.group, k.topic, k.partition, None if value is None else _offset(value))
    if version == GROUP_METADATA_KEY_VERSION:
        _, k = decode_versioned("GroupMetadataKey", key)
        return GroupRecord(k.group, None if value is None else _group(value))
    return None


def _offset(value: bytes) -> OffsetAndMetadata:
    _, m = decode_versioned("OffsetCommitValue", value)
    expire = m.expire_timestamp
    return OffsetAndMetadata(
        committed_offset=m.offset,
        leader_epoch=m.leader_epoch,
        metadata=m.metadata,
        commit_timestamp_ms=m.commit_timestamp,
        expire_timestamp_ms=None if expire == -1 else expire,
    )


def _group(value: bytes) -> GroupSnapshot:
    version, g = decode_versioned("GroupMetadataValue", value)
    members = tuple(
        MemberSnapshot(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            # v0 had no rebalance timeout: the session timeout served as both.
            rebalance_timeout_ms=m.session_timeout if version == 0 else m.rebalance_timeout,
            session_timeout_ms=m.session_timeout,
            subscription=m.subscription,
            assignment=m.assignment,
        )
        for m in g.members
    )
    timestamp = g.current_state_timestamp
    return GroupSnapshot(
        protocol_type=g.protocol_type,
        generation_id=g.generation,
        protocol_name=g.protocol,
        leader_id=g.leader,
        state_timestamp_ms=None if timestamp == -1 else timestamp,
        members=members,
    )
