"""Produce validation on any bytes: it accepts or refuses with a Kafka error code, nothing else
escapes (an exception there would cost the client its connection and log a traceback). The
bytes are valid batches of every codec with random edits, cuts and header fields, CRC made right
again so the edits reach the records."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalike.protocol import compression
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, batch_crc_ok, build_batch
from kafkalike.protocol.validation import RecordsRefused, TopicSettings, request_fault, validate_produce_records
from kafkalike.testing.hostile_batches import refresh_crc

NOW_MS = 1_800_000_000_000
HEADER_FIELDS = [
    (0, ">q"),
    (8, ">i"),
    (16, ">b"),
    (21, ">h"),
    (23, ">i"),
    (27, ">q"),
    (35, ">q"),
    (43, ">q"),
    (57, ">i"),
]


def _batch(codec: int, count: int) -> bytes:
    records = [
        Record(key=None if i % 3 == 0 else b"k%d" % i, value=b"v" * (i * 7), timestamp_delta=i, headers=[("h", b"x")])
        for i in range(count)
    ]
    return build_batch(records, base_timestamp=NOW_MS, compression=codec)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from([0, 1, 2, 3, 4]),
    count=st.integers(1, 12),
    edits=st.lists(st.tuples(st.integers(61, 1 << 14), st.integers(0, 255)), max_size=4),
    field=st.none() | st.tuples(st.sampled_from(HEADER_FIELDS), st.integers(-(1 << 31), (1 << 31) - 1)),
    cut=st.integers(0, 30),
    tail=st.binary(max_size=30),
    crc=st.booleans(),
    topic=st.builds(
        TopicSettings,
        compacted=st.booleans(),
        log_append_time=st.booleans(),
        timestamp_before_max_ms=st.sampled_from([0, 1000, (1 << 63) - 1]),
        timestamp_after_max_ms=st.sampled_from([0, 3_600_000, (1 << 63) - 1]),
        compression_type=st.sampled_from(["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]),
    ),
    version=st.sampled_from([3, 6, 7, 9, 12]),
)
def test_validation_accepts_or_refuses_with_a_kafka_code(
    codec: int,
    count: int,
    edits: list[tuple[int, int]],
    field: tuple[tuple[int, str], int] | None,
    cut: int,
    tail: bytes,
    crc: bool,
    topic: TopicSettings,
    version: int,
) -> None:
    batch = bytearray(_batch(codec, count))
    for where, byte in edits:
        batch[61 + where % max(len(batch) - 61, 1)] = byte
    if field is not None:
        (offset, fmt), value = field
        size = struct.calcsize(fmt)
        struct.pack_into(fmt, batch, offset, value % (1 << (8 * size)) - (1 << (8 * size - 1)))
    if crc:
        batch = bytearray(refresh_crc(batch))
    records = bytes(batch[: max(len(batch) - cut, 0)]) + tail
    fault = request_fault(records, api_version=version, topic_exists=True)
    assert fault is None or fault.code in ErrorCode.__members__.values()
    try:
        valid = validate_produce_records(records, topic, now_ms=NOW_MS, api_version=version, topic_partition="t-0")
    except RecordsRefused as refused:
        assert refused.code in set(ErrorCode)
        assert refused.code != ErrorCode.NONE
        return
    # Accepted: one whole batch, its count read, its CRC right.
    assert valid.record_count == valid.header.records_count >= 1
    assert len(valid.records) == valid.header.size
    assert compression.CODEC_NAMES.get(valid.header.compression) is not None
    assert batch_crc_ok(valid.records, 0, valid.header)
