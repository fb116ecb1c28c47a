"""The offsets topic's record layout, group partitioning and the keyed timer."""

from __future__ import annotations

import pytest

from kafkalike.group import OffsetAndMetadata, partition_for
from kafkalike.group.records import (
    GroupRecord,
    GroupSnapshot,
    MemberSnapshot,
    OffsetRecord,
    RecordError,
    decode_record,
    group_metadata_record,
    group_tombstone,
    java_string_hash,
    offset_commit_record,
    offset_tombstone,
)
from kafkalike.group.timer import Timer


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("hello", 99162322), ("é", 233), ("\U0001f600", 1772899), ("polygenelubricants", -(2**31))],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_matches_kafka() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # abs(MIN_VALUE) is 0 in Kafka's Utils.abs
    negative = next(s for s in (f"consumer-group-{i}" for i in range(1000)) if java_string_hash(s) < 0)
    assert partition_for(negative, 50) == -java_string_hash(negative) % 50


def test_offset_commit_record_bytes_follow_kafka() -> None:
    key, value = offset_commit_record("g", "t", 3, OffsetAndMetadata(42, 7, "m", 1000))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert value == (
        b"\x00\x03" + (42).to_bytes(8, "big") + (7).to_bytes(4, "big") + b"\x00\x01m" + (1000).to_bytes(8, "big")
    )
    assert decode_record(key, value) == OffsetRecord("g", "t", 3, OffsetAndMetadata(42, 7, "m", 1000))


def test_an_explicit_expiry_is_written_as_value_v1() -> None:
    key, value = offset_commit_record("g", "t", 0, OffsetAndMetadata(1, -1, "", 10, 20))
    assert value is not None and value[:2] == b"\x00\x01"
    record = decode_record(key, value)
    assert isinstance(record, OffsetRecord) and record.offset == OffsetAndMetadata(1, -1, "", 10, 20)


def test_group_metadata_round_trip_and_tombstones() -> None:
    snapshot = GroupSnapshot(
        "consumer",
        5,
        "range",
        "m1",
        123,
        (MemberSnapshot("m1", "i1", "c", "/127.0.0.1", 300, 100, b"sub", b"asg"),),
    )
    key, value = group_metadata_record("g", snapshot)
    assert key == b"\x00\x02\x00\x01g"
    assert value is not None and value[:2] == b"\x00\x03"
    assert decode_record(key, value) == GroupRecord("g", snapshot)
    assert decode_record(*group_tombstone("g")) == GroupRecord("g", None)
    assert decode_record(*offset_tombstone("g", "t", 1)) == OffsetRecord("g", "t", 1, None)


def test_other_record_types_are_skipped_and_garbage_is_an_error() -> None:
    assert decode_record(b"\x00\x03whatever", b"x") is None  # a KIP-848 consumer group record
    with pytest.raises(RecordError):
        decode_record(b"\x00", None)
    with pytest.raises(RecordError):
        decode_record(b"\x00\x01\x00", None)
    with pytest.raises(RecordError):
        decode_record(b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x09junk")


def test_timer_fires_in_deadline_order_and_keys_replace() -> None:
    timer = Timer()
    fired: list[tuple[str, int]] = []
    timer.schedule("a", 30, lambda now: fired.append(("a", now)))
    timer.schedule("b", 10, lambda now: fired.append(("b", now)))
    timer.schedule("c", 20, lambda now: fired.append(("c", now)))
    timer.schedule("a", 15, lambda now: fired.append(("a2", now)))
    timer.cancel("c")
    timer.cancel("missing")
    assert timer.next_deadline() == 10 and len(timer) == 2
    assert timer.run_due(9) == 0
    assert timer.run_due(100) == 2
    assert fired == [("b", 100), ("a2", 100)]
    assert timer.next_deadline() is None


def test_timer_actions_may_schedule_due_timers() -> None:
    timer = Timer()
    fired: list[str] = []

    def first(now: int) -> None:
        fired.append("first")
        timer.schedule("second", now, lambda _: fired.append("second"))

    timer.schedule("first", 5, first)
    assert timer.run_due(5) == 2
    assert fired == ["first", "second"]
