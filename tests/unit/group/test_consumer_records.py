"""The KIP-848 records of __consumer_offsets: Kafka's byte layout, round trips and tombstones."""

from __future__ import annotations

import uuid

import pytest

from kafkalike.group.consumer_records import (
    ConsumerRecord,
    CurrentAssignment,
    CurrentAssignmentRecord,
    GroupEpochRecord,
    MemberSubscription,
    MemberSubscriptionRecord,
    PartitionMetadataRecord,
    TargetEpochRecord,
    TargetMemberRecord,
    TopicMetadata,
    decode_record,
    encode_record,
)
from kafkalike.group.records import RecordError, group_metadata_key
from kafkalike.group.records import decode_record as decode_classic

T = uuid.UUID("6f8b7c2e-1111-4a4a-9b9b-0123456789ab")
SUBSCRIPTION = MemberSubscription("i-1", "rack", "client", "/127.0.0.1", frozenset({"b", "a"}), "x.*", 30000, "range")
RECORDS: list[ConsumerRecord] = [
    GroupEpochRecord("g", 7),
    PartitionMetadataRecord("g", (TopicMetadata(T, "t", 6),)),
    MemberSubscriptionRecord("g", "m", SUBSCRIPTION),
    TargetEpochRecord("g", 7),
    TargetMemberRecord("g", "m", {T: frozenset({0, 2})}),
    CurrentAssignmentRecord("g", "m", CurrentAssignment(7, 6, 1, {T: frozenset({0})}, {T: frozenset({1})})),
]


def test_group_epoch_record_bytes_follow_kafka() -> None:
    key, value = encode_record(GroupEpochRecord("g", 7))
    assert key == b"\x00\x03" + b"\x00\x01g"
    # Flexible value v0: the int32 epoch, then an empty tagged-field section.
    assert value == b"\x00\x00" + (7).to_bytes(4, "big") + b"\x00"


def test_member_keys_carry_group_and_member() -> None:
    key, _ = encode_record(TargetMemberRecord("g", "m", {}))
    assert key == b"\x00\x07" + b"\x00\x01g" + b"\x00\x01m"
    key, _ = encode_record(CurrentAssignmentRecord("g", "m", None))
    assert key[:2] == b"\x00\x08"
    key, _ = encode_record(MemberSubscriptionRecord("g", "m", None))
    assert key[:2] == b"\x00\x05"


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip(record: ConsumerRecord) -> None:
    key, value = encode_record(record)
    assert value is not None
    assert decode_record(key, value) == record


def test_tombstones_round_trip() -> None:
    tombstones: list[ConsumerRecord] = [
        GroupEpochRecord("g", None),
        PartitionMetadataRecord("g", None),
        MemberSubscriptionRecord("g", "m", None),
        TargetEpochRecord("g", None),
        TargetMemberRecord("g", "m", None),
        CurrentAssignmentRecord("g", "m", None),
    ]
    for record in tombstones:
        key, value = encode_record(record)
        assert value is None
        assert decode_record(key, None) == record


def test_the_two_decoders_split_the_key_versions() -> None:
    for record in RECORDS:
        key, value = encode_record(record)
        assert decode_classic(key, value) is None
    assert decode_record(group_metadata_key("g"), None) is None
    assert decode_record(b"\x00\x09" + b"\x00\x01g", None) is None  # a share group's key: not ours


def test_unreadable_records_raise_record_error() -> None:
    with pytest.raises(RecordError):
        decode_record(b"\x00", None)
    key, value = encode_record(GroupEpochRecord("g", 1))
    assert value is not None
    with pytest.raises(RecordError):
        decode_record(key, value[:3])
