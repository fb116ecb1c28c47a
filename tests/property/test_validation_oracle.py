"""Produce validation against other implementations: every batch kafka-python's record builder
and our own build_batch make (every codec) is accepted, with the right count and max timestamp;
batches mutated in their records are refused exactly when kafka-python's record parser
(kafka.record) refuses them, where that parser reads records as Kafka does."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.errors import CorruptRecordError as KafkaPythonCorrupt
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkalike.protocol import compression, record_walk
from kafkalike.protocol.records import BATCH_HEADER_SIZE, Record, build_batch
from kafkalike.protocol.validation import RecordsRefused, TopicSettings, ValidBatch, validate_produce_records
from kafkalike.testing.hostile_batches import refresh_crc

NOW_MS = 1_800_000_000_000
CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]

keys = st.none() | st.binary(max_size=30)
values = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=10)), max_size=3)
records = st.lists(st.tuples(keys, values, headers, st.integers(-3_600_000, 3_600_000)), min_size=1, max_size=30)


def validate(batch: bytes) -> ValidBatch:
    return validate_produce_records(batch, TopicSettings(), now_ms=NOW_MS, api_version=9, topic_partition="t-0")


def kafka_python_batch(
    codec: int, items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for offset, (key, value, hdrs, delta) in enumerate(items):
        builder.append(offset, NOW_MS + delta, key, value, hdrs)
    return bytes(builder.build())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), items=records)
def test_batches_kafka_python_builds_are_accepted(codec: int, items: list) -> None:  # type: ignore[type-arg]
    valid = validate(kafka_python_batch(codec, items))
    assert (valid.record_count, valid.rebuilt) == (len(items), False)
    assert valid.max_timestamp == NOW_MS + max(delta for *_, delta in items)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), items=records)
def test_batches_build_batch_makes_are_accepted(codec: int, items: list) -> None:  # type: ignore[type-arg]
    base = min(delta for *_, delta in items)
    batch = build_batch(
        [Record(0, delta - base, 0, key, value, hdrs) for key, value, hdrs, delta in items],
        base_timestamp=NOW_MS + base,
        compression=codec,
    )
    valid = validate(batch)
    assert valid.record_count == len(items)
    assert valid.max_timestamp == NOW_MS + max(delta for *_, delta in items)


def _refused_by_kafka_python(batch: bytes) -> bool:
    try:
        list(DefaultRecordBatch(batch))
    except KafkaPythonCorrupt:
        return True
    except Exception:  # its codecs' own errors (an empty snappy stream, say): refused all the same
        return True
    return False


def _refused_by_us(batch: bytes) -> bool:
    try:
        validate(batch)
    except RecordsRefused:
        return True
    return False


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(CODECS),
    items=records,
    mutation=st.sampled_from(["truncate", "count", "extra", "length"]),
    amount=st.integers(1, 40),
    which=st.integers(0, 1000),
)
def test_mutated_batches_are_refused_where_kafka_python_refuses_them(
    codec: int,
    items: list,  # type: ignore[type-arg]
    mutation: str,
    amount: int,
    which: int,
) -> None:
    original = kafka_python_batch(compression.NONE, items)
    payload = bytearray(original[BATCH_HEADER_SIZE:])
    count = len(items)
    if mutation == "truncate":
        payload = payload[: max(len(payload) - amount, 0)]
    elif mutation == "count":
        count = max(count + (amount % 5) - 2, 1)
    elif mutation == "extra":
        payload += bytes(amount % 7 + 1)
    else:
        # Kafka reads a compressed batch it keeps as it came field by field and ignores the declared
        # record lengths (DefaultRecord.readPartiallyFrom); kafka-python does not: uncompressed only.
        codec = compression.NONE
        starts = _record_starts(payload, len(items))
        start = starts[which % len(starts)]
        if payload[start] >= 0x40:  # a one-byte length only, so that it stays one byte
            return
        payload[start] = ((payload[start] >> 1) + (amount % 3) + 1) << 1
    batch = _rewrap(original[:BATCH_HEADER_SIZE], compression.compress(codec, bytes(payload)), count, codec)
    assert _refused_by_us(batch) == _refused_by_kafka_python(batch)


def _rewrap(header: bytes, payload: bytes, count: int, codec: int) -> bytes:
    """kafka-python's batch header around other record bytes: length, codec, count and CRC made to fit."""
    out = bytearray(header) + payload
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">i", out, 23, count - 1)
    struct.pack_into(">i", out, 57, count)
    return refresh_crc(out)


def _record_starts(payload: bytes, count: int) -> list[int]:
    """Where each record's length varint begins."""
    starts, pos = [], 0
    for _ in range(count):
        starts.append(pos)
        shift = value = 0
        while True:
            b = payload[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        pos += (value >> 1) ^ -(value & 1)
    return starts


def test_the_oracle_catches_a_validator_that_lets_bad_records_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: a walk that takes whatever it cannot parse for the end of the records."""
    real = record_walk.walk

    def lenient(data: bytes, *args: Any) -> record_walk.WalkResult:
        result = real(data, *args)
        if result[0] == record_walk.STATUS_INVALID:
            return (record_walk.STATUS_OK, len(data), args[1], result[3], result[4], result[5], "")
        return result

    monkeypatch.setattr(record_walk, "walk", lenient)
    with pytest.raises(AssertionError):
        test_mutated_batches_are_refused_where_kafka_python_refuses_them()
