"""The records of __transaction_state, byte for byte as Kafka writes them, and partitioning."""

from __future__ import annotations

import struct

import pytest

from kafkalike.protocol.codec import schema
from kafkalike.txn.metadata import TxnTransit
from kafkalike.txn.records import (
    RecordError,
    decode_record,
    java_string_hash,
    key_bytes,
    partition_for,
    state_record,
    tombstone,
    value_bytes,
)
from kafkalike.txn.state import TxnState as S


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_key_is_version_0_and_the_id() -> None:
    assert key_bytes("my-txn") == b"\x00\x00" + _string("my-txn")


def test_value_v0_layout() -> None:
    transit = TxnTransit(42, -1, -1, 7, -1, 60_000, S.ONGOING, frozenset({("b", 3), ("a", 1), ("a", 0)}), 100, 200)
    expected = (
        struct.pack(">hqhib", 0, 42, 7, 60_000, 1)
        + struct.pack(">i", 2)
        + _string("a")
        + struct.pack(">iii", 2, 0, 1)
        + _string("b")
        + struct.pack(">ii", 1, 3)
        + struct.pack(">qq", 200, 100)
    )
    assert value_bytes(transit) == expected


def test_empty_state_has_null_partitions() -> None:
    transit = TxnTransit(42, -1, -1, 0, -1, 60_000, S.EMPTY, frozenset(), -1, 200)
    assert value_bytes(transit)[2 + 8 + 2 + 4 + 1 :][:4] == struct.pack(">i", -1)
    with pytest.raises(ValueError):
        value_bytes(TxnTransit(42, -1, -1, 0, -1, 60_000, S.EMPTY, frozenset({("a", 0)}), -1, 200))


def test_round_trip_and_tombstone() -> None:
    transit = TxnTransit(42, -1, -1, 7, -1, 60_000, S.PREPARE_COMMIT, frozenset({("a", 0)}), 100, 200)
    loaded = decode_record(*state_record("x", transit))
    assert loaded is not None and loaded.transactional_id == "x" and loaded.transit == transit
    gone = decode_record(*tombstone("x"))
    assert gone is not None and gone.transit is None


def test_value_v1_with_tagged_fields_is_read() -> None:
    body = {
        "producer_id": 5,
        "producer_epoch": 1,
        "transaction_timeout_ms": 1000,
        "transaction_status": 4,
        "transaction_partitions": [],
        "transaction_last_update_timestamp_ms": 10,
        "transaction_start_timestamp_ms": 9,
        "previous_producer_id": 4,
        "client_transaction_version": 2,
    }
    value = b"\x00\x01" + schema("TransactionLogValue", "message", 1).encode(body)
    loaded = decode_record(key_bytes("x"), value)
    assert loaded is not None and loaded.transit is not None
    assert (loaded.transit.state, loaded.transit.prev_producer_id) == (S.COMPLETE_COMMIT, 4)


def test_unknown_key_versions_are_skipped_and_garbage_refused() -> None:
    assert decode_record(b"\x00\x05" + _string("x"), b"") is None
    with pytest.raises(RecordError):
        decode_record(None, None)
    with pytest.raises(RecordError):
        decode_record(key_bytes("x"), b"\x00\x00\x01")


def test_partition_for_uses_javas_string_hash() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("transactional-id-1") == _java_hash("transactional-id-1")
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Integer.MIN_VALUE: abs is 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("a", 50) == 47


def _java_hash(text: str) -> int:
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h
