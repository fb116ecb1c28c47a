"""Produce payloads a hostile or buggy client might send, each with the answer Apache Kafka gives.

Every ``HostileCase`` builds the records field of one partition (``make(now_ms)``) and names the
topic configs it needs and Kafka 4.x's answer: the error code, whether the answer carries the log
start offset, and how many RecordError entries come with it. The answers were taken from Apache
Kafka 4.0.2 (compat_tests/differential/test_produce_validation.py sends every case to both
brokers and compares); tests of kafkalike alone assert them.

``valid_batch`` is the well-formed batch the cases start from.
"""

from __future__ import annotations

import functools
import gzip
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import cramjam
import crc32c
import zstandard

from kafkalike.protocol import compression
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import BATCH_HEADER_SIZE, CRC_OFFSET, CRC_START, Record, build_batch, encode_record

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class HostileCase:
    name: str
    make: Callable[[int], bytes]
    code: ErrorCode
    with_log_start: bool = True
    record_errors: int = 0
    configs: dict[str, str] = field(default_factory=dict)
    api_version: int = 9
    slow: bool = False  # builds hundreds of MiB to compress: the decompression bombs
    # Kafka fails the whole request for this one: every partition gets the code and a message.
    whole_request: bool = False


def valid_batch(now_ms: int, count: int = 3, codec: int = 0, **kwargs: object) -> bytes:
    records = [
        Record(key=b"key-%d" % i, value=b"value-%d" % i, timestamp_delta=i, headers=[("h", b"%d" % i)])
        for i in range(count)
    ]
    return build_batch(records, base_timestamp=now_ms, compression=codec, **kwargs)  # type: ignore[arg-type]


def refresh_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def patched(batch: bytes, offset: int, fmt: str, value: int, *, crc: bool = True) -> bytes:
    """``batch`` with one header field overwritten (and its CRC made right again, unless ``crc`` false)."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, offset, value)
    return refresh_crc(out) if crc else bytes(out)


def with_payload(
    payload: bytes, count: int, now_ms: int, *, codec: int = 0, last_offset_delta: int | None = None
) -> bytes:
    """A batch header with a correct CRC around any record bytes."""
    out = bytearray(valid_batch(now_ms, 1)[:BATCH_HEADER_SIZE]) + payload
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">i", out, 23, count - 1 if last_offset_delta is None else last_offset_delta)
    struct.pack_into(">i", out, 57, count)
    return refresh_crc(out)


def _records(count: int, start: int = 0) -> bytes:
    return b"".join(encode_record(Record(key=b"k", value=b"v%d" % i, offset_delta=i)) for i in range(start, count))


@functools.cache
def _zeros_zstd(size: int) -> bytes:
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    block = bytes(16 << 20)
    parts = [cobj.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, cobj.flush()])


@functools.cache
def _zeros_gzip(size: int) -> bytes:
    cobj = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(16 << 20)
    parts = [cobj.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, cobj.flush()])


def _garbage(codec: int) -> Callable[[int], bytes]:
    def make(now: int) -> bytes:
        noise = bytes((i * 37 + 11) & 0xFF for i in range(200))
        header = {
            compression.GZIP: b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03",
            compression.SNAPPY: compression.XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 200),
            compression.LZ4: b"\x04\x22\x4d\x18",
            compression.ZSTD: b"\x28\xb5\x2f\xfd",
        }[codec]
        return with_payload(header + noise, 3, now, codec=codec)

    return make


def _truncated(codec: int) -> Callable[[int], bytes]:
    def make(now: int) -> bytes:
        body = b"".join(encode_record(Record(key=b"k", value=bytes(range(256)) * 8, offset_delta=i)) for i in range(3))
        stream = compression.compress(codec, body)
        return with_payload(stream[: len(stream) // 2], 3, now, codec=codec)

    return make


def _raw_snappy(*, garbage: bool) -> Callable[[int], bytes]:
    def make(now: int) -> bytes:
        body = b"".join(encode_record(Record(key=b"k", value=bytes(range(256)) * 8, offset_delta=i)) for i in range(3))
        block = bytes(cramjam.snappy.compress_raw(body))
        stream = b"\x80\x30" + bytes((i * 37 + 11) & 0xFF for i in range(100)) if garbage else block[: len(block) // 2]
        return with_payload(stream, 3, now, codec=compression.SNAPPY)

    return make


def _bomb(compress: Callable[[int], bytes], codec: int, size: int) -> Callable[[int], bytes]:
    def make(now: int) -> bytes:
        return with_payload(compress(size), 1, now, codec=codec)

    return make


def _record_bytes(body: bytes) -> bytes:
    """One record: a length varint (zigzag, one byte) then ``body``."""
    return bytes([len(body) << 1]) + body


def _offsets_not_consecutive(codec: int) -> Callable[[int], bytes]:
    """Three records whose offset deltas are 0, 2, 4, compressed with ``codec`` (0: not)."""
    records = b"".join(encode_record(Record(value=b"v"), offset_delta=2 * i) for i in range(3))
    payload = records if codec == 0 else compression.compress(codec, records)
    return lambda now: with_payload(payload, 3, now, codec=codec)


def _with_codec(codec: int) -> Callable[[int], bytes]:
    return lambda now: patched(valid_batch(now), 21, ">h", codec)


def _trailing_after_batch(now: int) -> bytes:
    return valid_batch(now) + b"\x00" * 11


def _second_entry_too_small(now: int) -> bytes:
    return valid_batch(now) + bytes(8) + struct.pack(">i", 3)


CASES: list[HostileCase] = [
    # The request: Kafka's ProduceRequest.validateRecords.
    HostileCase("two_batches", lambda now: valid_batch(now) + valid_batch(now), ErrorCode.INVALID_RECORD, False),
    HostileCase("empty", lambda now: b"", ErrorCode.INVALID_RECORD, False),
    HostileCase("truncated_batch", lambda now: valid_batch(now)[:-5], ErrorCode.INVALID_RECORD, False),
    HostileCase("magic_1", lambda now: patched(valid_batch(now), 16, ">b", 1), ErrorCode.INVALID_RECORD, False),
    HostileCase(
        "magic_7",
        lambda now: patched(valid_batch(now), 16, ">b", 7),
        ErrorCode.CORRUPT_MESSAGE,
        False,
        whole_request=True,
    ),
    HostileCase(
        "first_entry_too_small",
        lambda now: bytes(8) + struct.pack(">i", 3) + bytes(20),
        ErrorCode.CORRUPT_MESSAGE,
        False,
        whole_request=True,
    ),
    HostileCase(
        "codec_7_before_v7",
        _with_codec(7),
        ErrorCode.UNKNOWN_SERVER_ERROR,
        False,
        api_version=5,
        whole_request=True,
    ),
    HostileCase("second_entry_too_small", _second_entry_too_small, ErrorCode.CORRUPT_MESSAGE, False),
    HostileCase(
        "zstd_before_v7",
        lambda now: valid_batch(now, codec=4),
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        False,
        api_version=5,
    ),
    # The log: UnifiedLog.analyzeAndValidateRecords.
    HostileCase("base_offset_5", lambda now: patched(valid_batch(now), 0, ">q", 5), ErrorCode.INVALID_RECORD),
    HostileCase(
        "bad_crc", lambda now: patched(valid_batch(now), 17, ">I", 1, crc=False), ErrorCode.CORRUPT_MESSAGE, False
    ),
    *(HostileCase(f"codec_{codec}", _with_codec(codec), ErrorCode.UNKNOWN_SERVER_ERROR) for codec in (5, 6, 7)),
    # The batch header: LogValidator.validateBatch.
    HostileCase("count_above_offsets", lambda now: patched(valid_batch(now), 57, ">i", 4), ErrorCode.INVALID_RECORD),
    HostileCase(
        "count_zero",
        lambda now: patched(patched(valid_batch(now), 57, ">i", 0), 23, ">i", -1),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase("control_batch", lambda now: patched(valid_batch(now), 21, ">h", 0x20), ErrorCode.INVALID_RECORD),
    HostileCase(
        "producer_id_without_sequence", lambda now: patched(valid_batch(now), 43, ">q", 1000), ErrorCode.INVALID_RECORD
    ),
    # The records: DefaultRecord and the batch's record iterator.
    HostileCase("fewer_records_than_declared", lambda now: with_payload(_records(2), 3, now), ErrorCode.INVALID_RECORD),
    HostileCase("more_records_than_declared", lambda now: with_payload(_records(4), 3, now), ErrorCode.INVALID_RECORD),
    HostileCase(
        "bytes_after_the_records", lambda now: with_payload(_records(3) + b"\x00\x00", 3, now), ErrorCode.INVALID_RECORD
    ),
    HostileCase(
        "record_length_too_long",
        lambda now: with_payload(b"\x10" + b"\x00\x00\x00\x01\x01\x00" + b"\x00\x00", 1, now),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase(
        "record_length_too_short",
        lambda now: with_payload(b"\x08" + b"\x00\x00\x00\x02k\x00\x00", 1, now),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase(
        "record_length_past_the_batch",
        lambda now: with_payload(b"\xfe\x01" + b"\x00" * 6, 1, now),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase(
        "record_length_varint_6_bytes",
        lambda now: with_payload(b"\x80\x80\x80\x80\x80\x01" + b"\x00" * 6, 1, now),
        ErrorCode.UNKNOWN_SERVER_ERROR,
    ),
    HostileCase(
        "timestamp_varint_11_bytes",
        lambda now: with_payload(_record_bytes(b"\x00" + b"\x80" * 10 + b"\x01\x00\x01\x01\x00"), 1, now),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase(
        "header_count_negative",
        lambda now: with_payload(_record_bytes(b"\x00\x00\x00\x01\x01\x01"), 1, now),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase(
        "header_count_huge",
        lambda now: with_payload(_record_bytes(b"\x00\x00\x00\x01\x01\xfe\xff\xff\xff\x0f"), 1, now),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase(
        "header_key_null",
        lambda now: with_payload(_record_bytes(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 1, now),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase("garbage_records", lambda now: with_payload(b"\x13\x37" * 20, 3, now), ErrorCode.INVALID_RECORD),
    # Compressed batches: decompressed as a stream.
    *(
        HostileCase(f"garbage_{compression.CODEC_NAMES[c]}", _garbage(c), ErrorCode.UNKNOWN_SERVER_ERROR)
        for c in (1, 2, 3, 4)
    ),
    *(
        HostileCase(f"truncated_{compression.CODEC_NAMES[c]}", _truncated(c), ErrorCode.UNKNOWN_SERVER_ERROR)
        for c in (1, 2, 3, 4)
    ),
    # librdkafka's snappy: one raw block, no xerial framing.
    HostileCase("garbage_snappy_raw", _raw_snappy(garbage=True), ErrorCode.UNKNOWN_SERVER_ERROR),
    HostileCase("truncated_snappy_raw", _raw_snappy(garbage=False), ErrorCode.UNKNOWN_SERVER_ERROR),
    HostileCase(
        "compressed_more_records_than_declared",
        lambda now: with_payload(compression.compress(compression.GZIP, _records(4)), 3, now, codec=compression.GZIP),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase(
        "compressed_fewer_records_than_declared",
        lambda now: with_payload(compression.compress(compression.LZ4, _records(2)), 3, now, codec=compression.LZ4),
        ErrorCode.INVALID_RECORD,
    ),
    HostileCase(
        "zstd_bomb_1_gib_of_zeros", _bomb(_zeros_zstd, compression.ZSTD, 1 << 30), ErrorCode.INVALID_RECORD, slow=True
    ),
    HostileCase(
        "gzip_bomb_800_mib_of_zeros",
        _bomb(_zeros_gzip, compression.GZIP, 800 << 20),
        ErrorCode.INVALID_RECORD,
        slow=True,
    ),
    # Record faults: RecordError entries.
    HostileCase(
        "compacted_without_key",
        lambda now: build_batch(
            [Record(value=b"v"), Record(key=b"k", value=b"v"), Record(value=b"v")], base_timestamp=now
        ),
        ErrorCode.INVALID_RECORD,
        record_errors=2,
        configs={"cleanup.policy": "compact"},
    ),
    HostileCase(
        "compacted_without_key_gzip",
        lambda now: build_batch([Record(value=b"v")], base_timestamp=now, compression=compression.GZIP),
        ErrorCode.INVALID_RECORD,
        record_errors=1,
        configs={"cleanup.policy": "compact"},
    ),
    HostileCase(
        "timestamp_two_hours_ahead",
        lambda now: valid_batch(now + 2 * HOUR_MS),
        ErrorCode.INVALID_TIMESTAMP,
        record_errors=3,
    ),
    HostileCase(
        "timestamp_a_day_old",
        lambda now: valid_batch(now - 24 * HOUR_MS, codec=compression.LZ4),
        ErrorCode.INVALID_TIMESTAMP,
        record_errors=3,
        configs={"message.timestamp.before.max.ms": str(HOUR_MS)},
    ),
    HostileCase(
        "log_append_time_from_producer",
        lambda now: valid_batch(now, timestamp_type=1, max_timestamp=-1),
        ErrorCode.INVALID_TIMESTAMP,
        record_errors=3,
        configs={"message.timestamp.type": "LogAppendTime"},
    ),
    HostileCase(
        "log_append_time_from_producer_zstd",
        lambda now: valid_batch(now, codec=compression.ZSTD, timestamp_type=1, max_timestamp=-1),
        ErrorCode.INVALID_TIMESTAMP,
        record_errors=3,
    ),
    HostileCase(
        "log_append_time_from_producer_recompressed",
        lambda now: valid_batch(now, codec=compression.LZ4, timestamp_type=1, max_timestamp=-1),
        ErrorCode.INVALID_TIMESTAMP,
        record_errors=3,
        configs={"compression.type": "gzip"},
    ),
    HostileCase(
        "recompressed_with_a_bad_record",
        lambda now: with_payload(b"\x80\x80\x80\x80\x80\x01" + b"\x00" * 6, 1, now),
        ErrorCode.UNKNOWN_SERVER_ERROR,
        configs={"compression.type": "lz4"},
    ),
    HostileCase(
        "compressed_offsets_not_consecutive",
        _offsets_not_consecutive(compression.GZIP),
        ErrorCode.UNKNOWN_SERVER_ERROR,
    ),
]

# Accepted by Kafka although they look odd: what a validator must not refuse.
ACCEPTED: list[HostileCase] = [
    HostileCase("bytes_after_the_batch", _trailing_after_batch, ErrorCode.NONE),
    HostileCase(
        "key_length_minus_3",
        lambda now: with_payload(_record_bytes(b"\x00\x00\x00\x05\x00\x00"), 1, now),
        ErrorCode.NONE,
    ),
    HostileCase(
        "header_key_not_utf8",
        lambda now: with_payload(_record_bytes(b"\x00\x00\x00\x01\x01\x02\x02\xff\x01"), 1, now),
        ErrorCode.NONE,
    ),
    HostileCase(
        "record_attributes_set",
        lambda now: with_payload(_record_bytes(b"\xff\x00\x00\x01\x01\x00"), 1, now),
        ErrorCode.NONE,
    ),
    # Kafka reads a compressed batch it keeps as it came field by field, its record lengths unread.
    HostileCase(
        "compressed_record_length_lies",
        lambda now: with_payload(
            compression.compress(compression.GZIP, b"\xc8\x01" + b"\x00\x00\x00\x01\x01\x00"), 1, now, codec=1
        ),
        ErrorCode.NONE,
    ),
    HostileCase(
        "uncompressed_offsets_not_consecutive",
        _offsets_not_consecutive(0),
        ErrorCode.NONE,
    ),
    HostileCase(
        "recompressed_to_the_topic_codec",
        lambda now: valid_batch(now, codec=compression.LZ4),
        ErrorCode.NONE,
        configs={"compression.type": "gzip"},
    ),
    HostileCase(
        "uncompressed_recompressed",
        lambda now: valid_batch(now),
        ErrorCode.NONE,
        configs={"compression.type": "lz4"},
    ),
    HostileCase(
        "compressed_offsets_not_consecutive_recompressed",
        _offsets_not_consecutive(compression.GZIP),
        ErrorCode.NONE,
        configs={"compression.type": "zstd"},
    ),
    HostileCase(
        "gzip_members_concatenated",
        lambda now: with_payload(
            gzip.compress(_records(2)) + gzip.compress(_records(3, 2)), 3, now, codec=compression.GZIP
        ),
        ErrorCode.NONE,
    ),
]

__all__ = ["ACCEPTED", "CASES", "HostileCase", "patched", "refresh_crc", "valid_batch", "with_payload"]
