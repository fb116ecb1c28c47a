"""The __cluster_metadata framing: ApiMessageAndVersion values, control records, batches, snapshots."""

from __future__ import annotations

import struct
import uuid

import pytest

from kafkalike.protocol.errors import EncodeError
from kafkalike.protocol.metadata_records import (
    ApiMessageAndVersion,
    ControlMessageType,
    MetadataRecordError,
    MetadataRecordType,
    build_control_batch,
    build_metadata_batch,
    build_snapshot,
    control_message,
    decode_metadata_record,
    encode_metadata_record,
    leader_change_batch,
    metadata_record,
    read_metadata_batches,
    read_snapshot,
)
from kafkalike.protocol.records import CONTROL_MASK, decode_records, read_batch_header
from kafkalike.protocol.spec import load_specs

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
T = MetadataRecordType


def test_topic_record_value_is_frame_version_type_version_then_the_message() -> None:
    value = encode_metadata_record(metadata_record(T.TOPIC_RECORD, name="ab", topic_id=TOPIC_ID))
    # frame version 1, type 2, version 0; compact string "ab"; the uuid; no tagged fields.
    assert value == bytes([1, 2, 0, 3]) + b"ab" + TOPIC_ID.bytes + b"\x00"


def test_partition_change_writes_only_the_fields_that_change_as_tags() -> None:
    record = metadata_record(T.PARTITION_CHANGE_RECORD, version=0, partition_id=4, topic_id=TOPIC_ID, leader=7)
    value = encode_metadata_record(record)
    # One tagged field: tag 1 (leader), 4 bytes, int32 7.
    assert value == bytes([1, 5, 0]) + struct.pack(">i", 4) + TOPIC_ID.bytes + bytes([1, 1, 4]) + struct.pack(">i", 7)
    decoded = decode_metadata_record(value)
    assert (decoded.leader, decoded.isr, decoded.replicas, decoded.leader_recovery_state) == (7, None, None, -1)


def test_absent_partition_change_leader_means_no_change() -> None:
    record = metadata_record(T.PARTITION_CHANGE_RECORD, partition_id=0, topic_id=TOPIC_ID, isr=[1, 2])
    assert decode_metadata_record(encode_metadata_record(record)).leader == -2


@pytest.mark.parametrize("record_type", [t for t in MetadataRecordType if t.has_spec], ids=lambda t: t.name)
def test_every_modelled_record_round_trips_at_every_version(record_type: MetadataRecordType) -> None:
    versions = load_specs()[record_type.spec_name].versions
    assert versions.high is not None
    for v in range(versions.low, versions.high + 1):
        record = metadata_record(record_type, version=v)
        decoded = decode_metadata_record(encode_metadata_record(record))
        assert decoded == record
        assert (decoded.type, decoded.version) == (record_type, v)


def test_register_broker_round_trips_with_every_field_set() -> None:
    record = metadata_record(
        T.REGISTER_BROKER_RECORD,
        broker_id=3,
        incarnation_id=TOPIC_ID,
        broker_epoch=42,
        end_points=[{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092, "security_protocol": 0}],
        features=[{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 25}],
        rack="r1",
        fenced=False,
        in_controlled_shutdown=True,
        log_dirs=[uuid.UUID(int=5)],
    )
    decoded = decode_metadata_record(encode_metadata_record(record))
    assert decoded == record
    assert decoded.end_points[0].port == 9092 and decoded.log_dirs == [uuid.UUID(int=5)]


def test_fields_not_in_the_spec_are_refused_when_building() -> None:
    with pytest.raises(EncodeError, match="topic_name"):
        metadata_record(T.TOPIC_RECORD, topic_name="x")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (bytes([0, 2, 0]), "frame version 0"),
        (bytes([2, 2, 0]), "frame version 2"),
        (bytes([1, 13, 0]), "unknown metadata record type 13"),
        (bytes([1, 2, 9]), "version 9"),
        (bytes([1, 2, 0, 3]) + b"ab" + TOPIC_ID.bytes + b"\x00\x00", "left over"),
        (bytes([1, 2, 0, 3]) + b"ab", "TOPIC_RECORD"),
        (bytes([1]), "varint"),
    ],
)
def test_values_kafka_would_not_have_written_are_refused(value: bytes, message: str) -> None:
    with pytest.raises(MetadataRecordError, match=message):
        decode_metadata_record(value)


def test_record_types_without_a_spec_are_kept_as_raw_bytes() -> None:
    value = bytes([1, 14, 0]) + b"\x01\x02\x03"
    record = decode_metadata_record(value)
    assert (record.type, record.message, record.raw) == (T.CLIENT_QUOTA_RECORD, None, b"\x01\x02\x03")
    assert encode_metadata_record(record) == value


def test_data_batch_carries_the_leader_epoch_and_keyless_records() -> None:
    records = [
        metadata_record(T.TOPIC_RECORD, name="t", topic_id=TOPIC_ID),
        metadata_record(T.PARTITION_RECORD, partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1),
    ]
    data = build_metadata_batch(records, base_offset=10, leader_epoch=3, append_time_ms=1234)
    header = read_batch_header(data)
    assert (header.base_offset, header.last_offset, header.partition_leader_epoch) == (10, 11, 3)
    assert (header.base_timestamp, header.max_timestamp, header.producer_id) == (1234, 1234, -1)
    assert not header.is_control and not header.is_transactional
    assert [r.key for r in decode_records(data, 0, header)] == [None, None]
    (batch,) = read_metadata_batches(data)
    assert batch.records == tuple(records) and not batch.is_control
    assert (batch.base_offset, batch.leader_epoch, batch.append_time_ms) == (10, 3, 1234)


def test_leader_change_is_a_control_record_keyed_by_version_and_type() -> None:
    data = leader_change_batch(leader_id=1, voters=[1, 2, 3], granting_voters=[1, 2], base_offset=0, epoch=5, now_ms=9)
    header = read_batch_header(data)
    assert header.attributes & CONTROL_MASK and header.partition_leader_epoch == 5
    (record,) = decode_records(data, 0, header)
    assert record.key == struct.pack(">hh", 0, 2)
    # Version 0 body: int16 version, int32 leader, two compact arrays of (int32 voter id, no tags), no tags.
    voters = bytes([4]) + b"".join(struct.pack(">i", v) + b"\x00" for v in (1, 2, 3))
    granting = bytes([3]) + b"".join(struct.pack(">i", v) + b"\x00" for v in (1, 2))
    assert record.value == struct.pack(">hi", 0, 1) + voters + granting + b"\x00"
    (batch,) = read_metadata_batches(data)
    (message,) = batch.control
    assert message.type == ControlMessageType.LEADER_CHANGE
    assert [v.voter_id for v in message.message.voters] == [1, 2, 3]


def test_transaction_markers_in_a_control_batch_are_not_kraft_messages() -> None:
    from kafkalike.protocol.records import build_end_txn_marker

    data = build_end_txn_marker(commit=True, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0)
    (batch,) = read_metadata_batches(data)
    assert batch.control == () and batch.records == ()


def test_a_corrupted_batch_is_refused() -> None:
    data = bytearray(
        build_metadata_batch([metadata_record(T.NO_OP_RECORD)], base_offset=0, leader_epoch=1, append_time_ms=0)
    )
    data[-1] ^= 0xFF
    with pytest.raises(MetadataRecordError, match="CRC"):
        list(read_metadata_batches(bytes(data)))


def _topic_records(n: int) -> list[ApiMessageAndVersion]:
    return [metadata_record(T.TOPIC_RECORD, name=f"topic-{i}", topic_id=uuid.UUID(int=i + 1)) for i in range(n)]


def test_snapshot_is_header_then_records_then_footer_at_dense_offsets() -> None:
    records = _topic_records(50)
    data = build_snapshot(records, epoch=7, last_contained_log_timestamp=555, now_ms=999, max_batch_bytes=400)
    batches = list(read_metadata_batches(data))
    assert len(batches) > 3  # the records were cut into several batches
    assert [m.type for m in batches[0].control] == [ControlMessageType.SNAPSHOT_HEADER]
    assert batches[0].base_offset == 0
    assert [m.type for m in batches[-1].control] == [ControlMessageType.SNAPSHOT_FOOTER]
    assert all(b.leader_epoch == 7 for b in batches)
    assert [b.base_offset for b in batches[1:]] == [b.last_offset + 1 for b in batches[:-1]]
    contents = read_snapshot(data)
    assert contents.records == tuple(records)
    assert (contents.last_contained_log_timestamp, contents.kraft_version, contents.voters) == (555, 0, None)


def test_snapshot_with_kraft_version_1_carries_the_voter_set() -> None:
    voters = control_message(
        ControlMessageType.KRAFT_VOTERS,
        voters=[
            {
                "voter_id": 1,
                "voter_directory_id": uuid.UUID(int=9),
                "endpoints": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9093}],
                "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
            }
        ],
    ).message
    data = build_snapshot(
        _topic_records(1), epoch=1, last_contained_log_timestamp=0, now_ms=0, kraft_version=1, voters=voters
    )
    first = next(read_metadata_batches(data))
    assert [m.type for m in first.control] == [
        ControlMessageType.SNAPSHOT_HEADER,
        ControlMessageType.KRAFT_VERSION,
        ControlMessageType.KRAFT_VOTERS,
    ]
    contents = read_snapshot(data)
    assert contents.kraft_version == 1 and contents.voters == voters


def test_snapshot_without_its_footer_is_incomplete() -> None:
    data = build_snapshot(_topic_records(3), epoch=1, last_contained_log_timestamp=0, now_ms=0)
    footer_size = read_batch_header(data, _last_batch_pos(data)).size
    with pytest.raises(MetadataRecordError, match="SnapshotFooter"):
        read_snapshot(data[:-footer_size])
    body = bytes(
        build_control_batch(
            [control_message(ControlMessageType.SNAPSHOT_FOOTER)], base_offset=0, leader_epoch=1, append_time_ms=0
        )
    )
    with pytest.raises(MetadataRecordError, match="SnapshotHeader"):
        read_snapshot(body)


def _last_batch_pos(data: bytes) -> int:
    from kafkalike.protocol.records import iter_batches

    return [pos for pos, _ in iter_batches(data)][-1]
