"""Record batches: our reader and builder against themselves, kafka-python and librdkafka.

librdkafka has no offline encoder, so its batches are captured live: a throwaway broker on a
loopback socket answers just ApiVersions, Metadata and Produce with hand-built responses, and
keeps the records bytes of each Produce request.
"""

from __future__ import annotations

import socket
import struct
import threading
import types
import zlib
from dataclasses import dataclass
from typing import Any

import confluent_kafka
import cramjam
import crc32c
import kafka.codec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from kafkalike.protocol.compression import CODEC_NAMES, GZIP, LZ4, NONE, SNAPPY, ZSTD, compress
from kafkalike.protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError, MalformedRecordError
from kafkalike.protocol.records import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CRC_START,
    ControlRecordType,
    EndTxnMarker,
    LegacyMessage,
    Record,
    RecordBatchHeader,
    batch_crc_ok,
    batch_payload,
    build_batch,
    build_end_txn_marker,
    control_record_type,
    convert_legacy_to_v2,
    decode_legacy_message_set,
    decode_records,
    encode_record,
    iter_batches,
    parse_end_txn_marker,
    read_batch_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batch,
)
from kafkalike.protocol.validation import RecordsRefused, TopicSettings, validate_produce_records

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
TS = 1_700_000_000_000


def _snappy_shim() -> types.SimpleNamespace:
    """What kafka-python wants of python-snappy (raw blocks), from cramjam."""
    return types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )


@pytest.fixture(autouse=True)
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka.codec, "snappy", _snappy_shim())


def _refresh_crc(buf: bytearray, pos: int = 0) -> None:
    header = read_batch_header(buf, pos)
    struct.pack_into(">I", buf, pos + CRC_OFFSET, crc32c.crc32c(bytes(buf[pos + CRC_START : pos + header.size])))


def _sample_records() -> list[Record]:
    return [
        Record(timestamp_delta=0, offset_delta=0, key=b"k0", value=b"v0" * 40, headers=[("h", b"x"), ("n", None)]),
        Record(timestamp_delta=5, offset_delta=1, key=None, value=b"no key"),
        Record(timestamp_delta=-3, offset_delta=2, key=b"tombstone", value=None),
        Record(timestamp_delta=9, offset_delta=3, key=b"", value=b"", headers=[("", b""), ("ü", None)]),
        Record(timestamp_delta=10, offset_delta=4, key=b"big", value=bytes(range(256)) * 40),
    ]


# -- our own round trips --------------------------------------------------------------------------

records_strategy = st.lists(
    st.builds(
        Record,
        attributes=st.just(0),
        timestamp_delta=st.integers(-(2**40), 2**40),
        offset_delta=st.just(0),
        key=st.none() | st.binary(max_size=40),
        value=st.none() | st.binary(max_size=300),
        headers=st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(
    records=records_strategy,
    gaps=st.lists(st.integers(1, 1000), min_size=20, max_size=20),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.none() | st.integers(0, 2**50),
    producer=st.sampled_from([(-1, -1, -1), (7, 2, 0), (2**40, 32767, 2**31 - 100)]),
    transactional=st.booleans(),
    leader_epoch=st.integers(-1, 2**31 - 1),
)
def test_build_then_read_round_trip(
    records: list[Record],
    gaps: list[int],
    codec: int,
    base_offset: int,
    base_timestamp: int | None,
    producer: tuple[int, int, int],
    transactional: bool,
    leader_epoch: int,
) -> None:
    delta = 0
    numbered = []
    for record, gap in zip(records, gaps, strict=False):
        numbered.append(Record(0, record.timestamp_delta, delta, record.key, record.value, record.headers))
        delta += gap
    blob = build_batch(
        numbered,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        transactional=transactional,
        partition_leader_epoch=leader_epoch,
        base_timestamp=base_timestamp,
    )
    header = read_batch_header(blob)
    assert header.size == len(blob)
    assert batch_crc_ok(blob, 0, header)
    validate_batch(blob, 0, header, from_client=False)
    assert header.base_offset == base_offset
    assert header.compression == codec
    assert header.records_count == len(numbered)
    assert header.last_offset_delta == numbered[-1].offset_delta
    assert header.is_transactional == transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert header.partition_leader_epoch == leader_epoch
    base_ts = -1 if base_timestamp is None else base_timestamp
    assert header.base_timestamp == base_ts
    assert header.max_timestamp == base_ts + max(r.timestamp_delta for r in numbered)
    assert decode_records(blob, 0, header) == numbered
    assert list(iter_batches(blob + blob)) == [(0, header), (len(blob), header)]


def test_records_left_unnumbered_are_numbered_in_order() -> None:
    blob = build_batch([Record(value=b"a"), Record(value=b"b"), Record(value=b"c")], base_timestamp=TS)
    header = read_batch_header(blob)
    validate_batch(blob, 0, header)
    assert [r.offset_delta for r in decode_records(blob, 0, header)] == [0, 1, 2]
    assert header.last_offset_delta == 2
    with pytest.raises(ValueError):
        build_batch([Record(offset_delta=1), Record(offset_delta=1)])
    with pytest.raises(ValueError):
        build_batch([Record(offset_delta=-1)])


def test_record_offsets_and_timestamps() -> None:
    blob = bytearray(build_batch(_sample_records(), base_offset=100, base_timestamp=TS))
    header = read_batch_header(blob)
    records = decode_records(blob, 0, header)
    assert [r.offset(header) for r in records] == [100, 101, 102, 103, 104]
    assert [r.timestamp(header) for r in records] == [TS, TS + 5, TS - 3, TS + 9, TS + 10]
    set_log_append_time(blob, 0, header, TS + 999)
    header = read_batch_header(blob)
    validate_batch(blob, 0, header, from_client=False)
    assert header.log_append_time and header.max_timestamp == TS + 999
    assert {r.timestamp(header) for r in decode_records(blob, 0, header)} == {TS + 999}


def test_fields_outside_the_crc_can_be_set_in_place() -> None:
    blob = bytearray(build_batch(_sample_records(), base_timestamp=TS))
    set_base_offset(blob, 0, 4242)
    set_partition_leader_epoch(blob, 0, 17)
    header = read_batch_header(blob)
    assert (header.base_offset, header.partition_leader_epoch) == (4242, 17)
    validate_batch(blob, 0, header, from_client=False)


# -- damage: CRC, truncation, bad lengths ---------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_every_flipped_byte_under_the_crc_is_caught(codec: int) -> None:
    blob = build_batch(_sample_records(), compression=codec, base_timestamp=TS)
    for i in range(CRC_OFFSET, len(blob)):
        damaged = bytearray(blob)
        damaged[i] ^= 0x01
        try:
            header = read_batch_header(damaged)
        except CorruptRecordError:
            continue  # the length field itself, no longer matching the data
        with pytest.raises(CorruptRecordError) as info:
            validate_batch(damaged, 0, header, from_client=False)
        assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
def test_truncation_anywhere_is_detected(codec: int) -> None:
    one = build_batch(_sample_records(), compression=codec, base_timestamp=TS)
    blob = one + one
    for cut in range(1, len(blob)):
        if cut == len(one):
            assert len(list(iter_batches(blob[:cut]))) == 1
            continue
        with pytest.raises(CorruptRecordError):
            list(iter_batches(blob[:cut]))
        assert len(list(iter_batches(blob[:cut], partial_ok=True))) == (1 if cut > len(one) else 0)


def test_batch_length_below_the_header_is_corrupt() -> None:
    blob = bytearray(build_batch([Record(value=b"x")]))
    struct.pack_into(">i", blob, 8, 20)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(blob))
    struct.pack_into(">i", blob, 8, 5)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(blob))


def test_unknown_magic_is_corrupt_and_legacy_magic_is_refused() -> None:
    blob = bytearray(build_batch([Record(value=b"x")]))
    blob[16] = 3
    with pytest.raises(CorruptRecordError):
        list(iter_batches(blob))
    legacy = _kafka_python_legacy(1, NONE, [(0, TS, b"k", b"v")])
    with pytest.raises(InvalidRecordError) as info:
        list(iter_batches(legacy))
    assert info.value.error_code == ErrorCode.INVALID_RECORD
    ((pos, header),) = iter_batches(legacy, allow_legacy=True)
    assert (pos, header.magic, header.records_count, header.base_timestamp) == (0, 1, -1, TS)
    validate_batch(legacy, pos, header)


def _with_payload(records_bytes: bytes, count: int) -> bytearray:
    """A batch whose record area is ``records_bytes`` verbatim, CRC made valid."""
    blob = bytearray(build_batch([Record(value=b"x")], base_timestamp=TS))
    del blob[BATCH_HEADER_SIZE:]
    blob += records_bytes
    struct.pack_into(">i", blob, 8, len(blob) - 12)
    struct.pack_into(">i", blob, 57, count)
    struct.pack_into(">i", blob, 23, max(count - 1, 0))
    _refresh_crc(blob)
    return blob


@pytest.mark.parametrize(
    ("records_bytes", "count"),
    [
        (b"\xfe\xff\xff\xff\x0f", 1),  # record length 2^31-1
        (b"\x0e\x00\x00\x00\xfe\xff\xff\xff\x0f\x00\x00", 1),  # key length 2^31-1
        (b"\x0c\x00\x00\x00\x00\x00\xfe\xff\xff\xff\x0f", 1),  # header count 2^31-1
        (b"\x03", 1),  # negative record length
        (b"\x80\x80\x80\x80\x80\x80\x01", 1),  # varint of 7 bytes
        (b"\x0e\x00\x00\x00\x01\x01\x02\x02\x01", 1),  # header key null
        (encode_record(Record(value=b"x")) + b"\x00", 1),  # stray byte after the records
        (encode_record(Record(value=b"x")), 2),  # fewer records than declared
        (encode_record(Record(value=b"x")), 2**31 - 1),  # absurd count: refused before any loop
        (b"\x10" + encode_record(Record(value=b"x"))[1:] + b"\x00\x00\x00", 1),  # length past the fields
    ],
)
def test_malformed_records_are_invalid(records_bytes: bytes, count: int) -> None:
    blob = _with_payload(records_bytes, count)
    header = read_batch_header(blob)
    with pytest.raises(MalformedRecordError) as info:
        decode_records(blob, 0, header)
    # Kafka's answer for a batch whose CRC matched but whose records do not parse.
    assert info.value.error_code == ErrorCode.INVALID_RECORD
    assert isinstance(info.value, CorruptRecordError)


def test_records_kafka_reads_leniently_decode() -> None:
    # Kafka's DefaultRecord takes any negative length as null and decodes header keys with
    # replacement characters, so batches it stores (and this broker stores) decode.
    key_length_minus_3 = _with_payload(b"\x0c\x00\x00\x00\x05\x00\x00", 1)
    assert decode_records(key_length_minus_3, 0, read_batch_header(key_length_minus_3))[0].key is None
    not_utf8 = _with_payload(b"\x12\x00\x00\x00\x01\x01\x02\x02\xff\x01", 1)
    assert decode_records(not_utf8, 0, read_batch_header(not_utf8))[0].headers == [("\ufffd", None)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    codec=st.sampled_from([NONE, NONE, GZIP, ZSTD]),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.integers(0, 40),
)
def test_mangled_record_bytes_only_raise_protocol_errors(codec: int, edits: list[tuple[int, int]], cut: int) -> None:
    payload = bytearray(b"".join(encode_record(r) for r in _sample_records()))
    for where, byte in edits:
        payload[where % len(payload)] = byte
    payload = payload[: len(payload) - cut]
    blob = _with_payload(compress(codec, bytes(payload)), 5)
    struct.pack_into(">h", blob, 21, codec)
    _refresh_crc(blob)
    header = read_batch_header(blob)
    try:
        records = decode_records(blob, 0, header, max_uncompressed=1 << 20)
    except (CorruptRecordError, InvalidRecordError):
        return
    assert len(records) == 5


def test_decompression_is_bounded() -> None:
    blob = build_batch([Record(value=bytes(4 << 20))], compression=ZSTD)
    assert len(blob) < 1000
    header = read_batch_header(blob)
    with pytest.raises(CorruptRecordError):
        decode_records(blob, 0, header, max_uncompressed=1 << 20)
    assert decode_records(blob, 0, header)[0].value == bytes(4 << 20)


# -- what the broker checks of a produced batch --------------------------------------------------


def _header_edit(blob: bytes | bytearray, offset: int, fmt: str, value: int) -> bytearray:
    out = bytearray(blob)
    struct.pack_into(fmt, out, offset, value)
    _refresh_crc(out)
    return out


def test_produce_validation_follows_kafkas_log_validator() -> None:
    good = build_batch(_sample_records(), base_timestamp=TS)
    assert _validated(good)[1].records_count == 5
    bad = {
        "base offset": _header_edit(good, 0, ">q", 5),
        "count below range": _header_edit(good, 57, ">i", 4),
        "zero records": _header_edit(_header_edit(good, 57, ">i", 0), 23, ">i", 0),
        "count beyond range": _header_edit(good, 23, ">i", 3),
        "negative count": _header_edit(good, 57, ">i", -1),
        "control": _header_edit(good, 21, ">h", 0x20),
        "no sequence": _header_edit(good, 43, ">q", 12),
        "codec 5": _header_edit(good, 21, ">h", 5),
    }
    for name, blob in bad.items():
        with pytest.raises(InvalidRecordError):
            validate_batch(blob, 0, read_batch_header(blob))
            pytest.fail(name)
    # Replicated or loaded batches may be emptied by compaction, and keep their offset range.
    compacted = build_batch([], base_offset=10, last_offset_delta=4, base_timestamp=TS)
    validate_batch(compacted, 0, read_batch_header(compacted), from_client=False)
    with pytest.raises(InvalidRecordError):
        validate_batch(compacted, 0, read_batch_header(compacted))
    # Exactly one batch per partition.
    for records in (good + good, b""):
        with pytest.raises(RecordsRefused) as info:
            _validated(records)
        assert info.value.code == ErrorCode.INVALID_RECORD


def _validated(records: bytes) -> tuple[int, RecordBatchHeader]:
    """The produce path's validation (every record read), its clock at the records' time."""
    valid = validate_produce_records(records, TopicSettings(), now_ms=TS, api_version=9, topic_partition="t-0")
    return 0, valid.header


# -- control batches ------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_marker(commit: bool) -> None:
    blob = build_end_txn_marker(
        commit=commit, producer_id=77, producer_epoch=3, coordinator_epoch=9, timestamp=TS, base_offset=500
    )
    header = read_batch_header(blob)
    validate_batch(blob, 0, header, from_client=False)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, -1)
    (record,) = decode_records(blob, 0, header)
    assert record.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert record.value == struct.pack(">hi", 0, 9)
    assert control_record_type(record) == (ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    assert parse_end_txn_marker(record) == EndTxnMarker(commit, 9)
    # kafka-python's consumer reads it as a control record.
    batch = DefaultRecordBatch(blob)
    assert batch.is_control_batch and batch.validate_crc()
    (theirs,) = list(batch)
    assert (theirs.commit, theirs.abort, theirs.offset) == (commit, not commit, 500)


def test_control_record_parsing_is_strict_where_kafka_is() -> None:
    with pytest.raises(InvalidRecordError):
        control_record_type(Record(key=b"\x00\x00\x01"))
    with pytest.raises(InvalidRecordError):
        control_record_type(Record(key=struct.pack(">hh", -1, 0)))
    with pytest.raises(InvalidRecordError):
        parse_end_txn_marker(Record(key=struct.pack(">hh", 0, 2), value=struct.pack(">hi", 0, 1)))
    with pytest.raises(InvalidRecordError):
        parse_end_txn_marker(Record(key=struct.pack(">hh", 0, 1), value=b"\x00\x00\x00"))
    # Newer versions are read as version 0, with any extra bytes ignored.
    later = Record(key=struct.pack(">hh", 1, 0), value=struct.pack(">hi", 3, 42) + b"more")
    assert parse_end_txn_marker(later) == EndTxnMarker(False, 42, 3)


# -- kafka-python ---------------------------------------------------------------------------------

KP_MESSAGES: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
    (b"key-0", b"value " * 50, [("trace", b"abc"), ("empty", b"")]),
    (None, b"keyless", []),
    (b"tombstone", None, []),
    (b"big", bytes(range(256)) * 64, [("h", b"\x00\xff")]),
]


def _kafka_python_batch(codec: int, *, producer: tuple[int, int, int] = (-1, -1, -1), txn: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=txn,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 20,
    )
    for i, (key, value, headers) in enumerate(KP_MESSAGES):
        assert builder.append(i, timestamp=TS + 7 * i, key=key, value=value, headers=headers) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_kafka_python_batches_decode(codec: int) -> None:
    blob = _kafka_python_batch(codec, producer=(1234, 5, 60), txn=True)
    ((pos, header),) = iter_batches(blob)
    validate_batch(blob, pos, header)
    assert header.compression == codec and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, 60)
    records = decode_records(blob, pos, header)
    assert [(r.key, r.value, r.headers) for r in records] == [(k, v, h) for k, v, h in KP_MESSAGES]
    assert [r.timestamp(header) for r in records] == [TS + 7 * i for i in range(len(KP_MESSAGES))]
    assert [r.offset(header) for r in records] == list(range(len(KP_MESSAGES)))
    # The record bytes are exactly what our encoder writes for the same records.
    assert batch_payload(blob, pos, header) == b"".join(encode_record(r) for r in records)


@pytest.mark.parametrize("producer", [(-1, -1, -1), (1234, 5, 60)])
def test_uncompressed_batch_is_byte_identical_to_kafka_pythons(producer: tuple[int, int, int]) -> None:
    theirs = _kafka_python_batch(NONE, producer=producer, txn=producer[0] >= 0)
    header = read_batch_header(theirs)
    ours = build_batch(
        decode_records(theirs, 0, header),
        base_timestamp=header.base_timestamp,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        transactional=producer[0] >= 0,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    assert ours == theirs


@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_our_batches_decode_with_kafka_python(codec: int) -> None:
    records = _sample_records()
    blob = build_batch(
        records, base_offset=40, compression=codec, base_timestamp=TS, producer_id=9, producer_epoch=1, base_sequence=0
    )
    batch = DefaultRecordBatch(blob)
    assert batch.validate_crc()
    assert (batch.compression_type, batch.base_offset, batch.last_offset) == (codec, 40, 44)
    theirs = list(batch)
    assert [(m.offset, m.timestamp, m.key, m.value) for m in theirs] == [
        (40 + r.offset_delta, TS + r.timestamp_delta, r.key, r.value) for r in records
    ]
    assert [list(m.headers) for m in theirs] == [r.headers for r in records]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=records_strategy, codec=st.sampled_from(CODECS))
def test_kafka_python_reads_whatever_we_build(records: list[Record], codec: int) -> None:
    blob = build_batch(records, compression=codec, base_timestamp=TS)
    batch = DefaultRecordBatch(blob)
    assert batch.validate_crc()
    assert [(m.key, m.value, list(m.headers)) for m in batch] == [(r.key, r.value, r.headers) for r in records]


# -- legacy message sets --------------------------------------------------------------------------


def _kafka_python_legacy(magic: int, codec: int, messages: list[tuple[int, int, bytes | None, bytes | None]]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for offset, timestamp, key, value in messages:
        assert builder.append(offset, timestamp=timestamp, key=key, value=value) is not None
    return bytes(builder.build())


LEGACY_MESSAGES: list[tuple[int, int, bytes | None, bytes | None]] = [
    (i, TS + i, b"key-%d" % i if i % 3 else None, b"value %d " % i * 20) for i in range(6)
] + [(6, TS + 6, b"gone", None)]


@pytest.mark.parametrize(
    ("magic", "codec"),
    [(0, NONE), (0, GZIP), (0, SNAPPY), (1, NONE), (1, GZIP), (1, SNAPPY), (1, LZ4)],
)
def test_kafka_python_legacy_message_sets(magic: int, codec: int) -> None:
    blob = _kafka_python_legacy(magic, codec, LEGACY_MESSAGES)
    messages = decode_legacy_message_set(blob)
    expected_ts = [ts if magic else -1 for _, ts, _, _ in LEGACY_MESSAGES]
    assert [(m.offset, m.timestamp, m.key, m.value) for m in messages] == [
        (o, t, k, v) for (o, _, k, v), t in zip(LEGACY_MESSAGES, expected_ts, strict=True)
    ]
    assert {m.magic for m in messages} == {magic}
    # The same answer as kafka-python's own reader.
    (pos, header), *rest = iter_batches(blob, allow_legacy=True)
    theirs = [
        (r.offset, r.key, r.value)
        for p, h in [(pos, header), *rest]
        for r in LegacyRecordBatch(blob[p : p + h.size], magic)
    ]
    assert theirs == [(m.offset, m.key, m.value) for m in messages]
    # And up-converted to one v2 batch.
    v2 = convert_legacy_to_v2(blob)
    ((_, v2_header),) = iter_batches(v2)
    validate_batch(v2, 0, v2_header)
    assert v2_header.compression == codec
    records = decode_records(v2, 0, v2_header)
    assert [(r.offset(v2_header), r.timestamp(v2_header), r.key, r.value) for r in records] == [
        (m.offset, m.timestamp, m.key, m.value) for m in messages
    ]
    assert convert_legacy_to_v2(blob, compression=ZSTD) != v2


def test_legacy_crc_damage_is_corrupt() -> None:
    for codec in (NONE, GZIP):
        blob = _kafka_python_legacy(1, codec, LEGACY_MESSAGES)
        for pos, header in iter_batches(blob, allow_legacy=True):
            # The CRC covers magic to the end; offset and size sit outside it.
            for i in range(pos + 16, pos + header.size, 3):
                damaged = bytearray(blob)
                damaged[i] ^= 0x40
                with pytest.raises(CorruptRecordError):
                    decode_legacy_message_set(damaged)


def _legacy_message(
    magic: int, offset: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = struct.pack(">bb", magic, attributes)
    if magic:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def test_legacy_wrapper_offsets_timestamps_and_nesting() -> None:
    inner = b"".join(_legacy_message(1, i, 0, TS + i, None, b"m%d" % i) for i in range(3))
    # A magic 1 wrapper at absolute offset 102 holds relative offsets 0..2, so 100..102;
    # under LogAppendTime (attribute bit 3) every inner message takes the wrapper's timestamp.
    wrapper = _legacy_message(1, 102, GZIP | 0x08, TS + 50, None, compress(GZIP, inner))
    messages = decode_legacy_message_set(wrapper)
    assert [(m.offset, m.timestamp, m.log_append_time) for m in messages] == [
        (100 + i, TS + 50, True) for i in range(3)
    ]
    # A wrapper offset of 0 leaves inner offsets alone, as Kafka does for some producers.
    wrapper = _legacy_message(1, 0, GZIP, TS, None, compress(GZIP, inner))
    assert [m.offset for m in decode_legacy_message_set(wrapper)] == [0, 1, 2]
    # A wrapper offset below its last inner offset is invalid.
    with pytest.raises(InvalidRecordError):
        decode_legacy_message_set(_legacy_message(1, 1, GZIP, TS, None, compress(GZIP, inner)))
    nested = _legacy_message(1, 0, GZIP, TS, None, compress(GZIP, _legacy_message(1, 0, GZIP, TS, None, b"x")))
    with pytest.raises(InvalidRecordError):
        decode_legacy_message_set(_legacy_message(1, 0, GZIP, TS, None, compress(GZIP, nested)))
    mixed = _legacy_message(0, 0, 0, -1, None, b"old")
    with pytest.raises(InvalidRecordError):
        decode_legacy_message_set(_legacy_message(1, 0, GZIP, TS, None, compress(GZIP, mixed)))
    with pytest.raises(InvalidRecordError):
        decode_legacy_message_set(_legacy_message(1, 0, GZIP, TS, None, None))
    with pytest.raises(InvalidRecordError):
        decode_legacy_message_set(_legacy_message(1, 0, ZSTD, TS, None, compress(ZSTD, inner)))
    # Lengths past the message are corrupt, not allocated.
    broken = bytearray(_legacy_message(0, 0, 0, -1, b"k", b"v"))
    struct.pack_into(">i", broken, 18, 2**31 - 1)
    struct.pack_into(">I", broken, 12, zlib.crc32(bytes(broken[16:])))
    with pytest.raises(CorruptRecordError):
        decode_legacy_message_set(broken)


def test_legacy_partial_tail() -> None:
    blob = _kafka_python_legacy(1, NONE, LEGACY_MESSAGES)
    with pytest.raises(CorruptRecordError):
        decode_legacy_message_set(blob[:-3])
    assert len(decode_legacy_message_set(blob[:-3], partial_ok=True)) == len(LEGACY_MESSAGES) - 1
    assert isinstance(decode_legacy_message_set(blob)[0], LegacyMessage)


# -- librdkafka, captured from a live producer ----------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        self.pos += n
        return self.data[self.pos - n : self.pos].decode()

    def nullable_bytes(self) -> bytes | None:
        n = self.take(">i")
        if n < 0:
            return None
        self.pos += n
        return self.data[self.pos - n : self.pos]


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


class CaptureBroker:
    """Just enough of a broker on 127.0.0.1 for librdkafka to send one Produce request.

    ``produce_max`` picks the message format librdkafka writes: Produce v3+ means v2 batches,
    v2 magic 1 and v0-1 magic 0 message sets.
    """

    def __init__(self, produce_max: int) -> None:
        # librdkafka turns features on by advertised versions: v2 batches need Fetch 4, zstd Produce 7
        # and Fetch 10, LZ4 any FindCoordinator.
        fetch_max = {0: 0, 1: 1, 2: 2}.get(produce_max, 10)
        self.apis = {0: (0, produce_max), 1: (0, fetch_max), 3: (0, 1), 10: (0, 0), 18: (0, 3)}
        self.captured: list[tuple[int, bytes]] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._server.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _recv(conn: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(30)
        with conn:
            try:
                while not self._closed:
                    (size,) = struct.unpack(">i", self._recv(conn, 4))
                    if not 0 < size < 1 << 24:
                        return
                    request = _Reader(self._recv(conn, size))
                    api_key, version, correlation_id = request.take(">hhi")
                    request.string()  # client id
                    body = self._answer(api_key, version, request)
                    if body is None:
                        return
                    response = struct.pack(">i", correlation_id) + body
                    conn.sendall(struct.pack(">i", len(response)) + response)
            except (EOFError, OSError, struct.error):
                return

    def _answer(self, api_key: int, version: int, request: _Reader) -> bytes | None:
        if api_key == 18:  # ApiVersions; the response header stays v0 even for flexible versions
            if version == 0:
                return struct.pack(">hi", 0, len(self.apis)) + b"".join(
                    struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in self.apis.items()
                )
            entries = b"".join(struct.pack(">hhhb", k, lo, hi, 0) for k, (lo, hi) in self.apis.items())
            return struct.pack(">hB", 0, len(self.apis) + 1) + entries + struct.pack(">ib", 0, 0)
        if api_key == 3 and version <= 1:  # Metadata: one broker (this one) leading partition 0
            n = request.take(">i")
            topics = [request.string() or "" for _ in range(max(n, 0))]
            out = struct.pack(">ii", 1, 1) + _string("127.0.0.1") + struct.pack(">i", self.port)
            out += struct.pack(">hi", -1, 1) if version else b""
            out += struct.pack(">i", len(topics))
            for topic in topics:
                out += struct.pack(">h", 0) + _string(topic) + (b"\x00" if version else b"")
                out += struct.pack(">ihii", 1, 0, 0, 1) + struct.pack(">ii", 1, 1) + struct.pack(">ii", 1, 1)
            return out
        if api_key == 0 and version <= 7:  # Produce: keep the records, answer success
            if version >= 3:
                request.string()  # transactional id
            request.take(">hi")  # acks, timeout
            answers = []
            for _ in range(request.take(">i")):
                topic = request.string() or ""
                partitions = []
                for _ in range(request.take(">i")):
                    partitions.append(request.take(">i"))
                    self.captured.append((version, request.nullable_bytes() or b""))
                answers.append((topic, partitions))
            out = struct.pack(">i", len(answers))
            for topic, partitions in answers:
                out += _string(topic) + struct.pack(">i", len(partitions))
                for index in partitions:
                    out += struct.pack(">ihq", index, 0, 0)
                    out += struct.pack(">q", -1) if version >= 2 else b""
                    out += struct.pack(">q", 0) if version >= 5 else b""
            return out + (struct.pack(">i", 0) if version >= 1 else b"")
        return None


RDK_MESSAGES: list[tuple[bytes | None, bytes | None, list[tuple[str, str | bytes | None]]]] = [
    (b"key-0", b"value " * 50, [("trace", b"abc"), ("null", None)]),
    (None, b"keyless " * 10, []),
    (b"tombstone", None, []),
    (b"big", bytes(range(256)) * 64, [("h", b"\x00\xff")]),
]


@dataclass
class Captured:
    produce_version: int
    records: bytes


def _capture(codec: str, produce_max: int) -> Captured:
    broker = CaptureBroker(produce_max)
    delivered: list[Any] = []
    try:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{broker.port}",
                "compression.type": codec,
                "linger.ms": 50,
                "acks": 1,
                "message.timeout.ms": 10_000,
                "api.version.request": True,
                "log_level": 0,
            }
        )
        for i, (key, value, headers) in enumerate(RDK_MESSAGES):
            producer.produce(
                "records-test",
                key=key,
                value=value,
                headers=headers if produce_max >= 3 else None,
                timestamp=TS + 7 * i,
                partition=0,
                on_delivery=lambda err, _msg: delivered.append(err),
            )
        assert producer.flush(15) == 0
    finally:
        broker.close()
    assert delivered == [None] * len(RDK_MESSAGES)
    ((version, records),) = broker.captured
    return Captured(version, records)


RDK_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}


@pytest.fixture(scope="module")
def librdkafka_batches() -> dict[tuple[str, int], Captured]:
    captured = {(codec, 7): _capture(codec, 7) for codec in RDK_CODECS}
    for produce_max in (2, 1):  # magic 1, then magic 0
        for codec in RDK_CODECS[:-1]:
            captured[codec, produce_max] = _capture(codec, produce_max)
    return captured


@pytest.mark.parametrize("codec", RDK_CODECS)
def test_librdkafka_batches_decode(librdkafka_batches: dict[tuple[str, int], Captured], codec: str) -> None:
    captured = librdkafka_batches[codec, 7]
    assert captured.produce_version == 7
    blob = captured.records
    pos, header = _validated(blob)
    assert header.compression == CODEC_IDS[codec], "librdkafka sent it compressed as asked"
    assert (header.producer_id, header.base_sequence) == (-1, -1)
    records = decode_records(blob, pos, header)
    assert [(r.key, r.value, r.headers) for r in records] == [(k, v, h) for k, v, h in RDK_MESSAGES]
    assert [r.timestamp(header) for r in records] == [TS + 7 * i for i in range(len(RDK_MESSAGES))]
    assert header.max_timestamp == TS + 7 * (len(RDK_MESSAGES) - 1)
    # Our record encoding matches librdkafka's byte for byte.
    assert batch_payload(blob, pos, header) == b"".join(encode_record(r) for r in records)
    # Rebuilt with the same codec, the batch is an equivalent one.
    ours = build_batch(
        records,
        compression=header.compression,
        base_timestamp=header.base_timestamp,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    ours_header = read_batch_header(ours)
    assert decode_records(ours, 0, ours_header) == records
    assert ours_header._replace(crc=0, batch_length=0) == header._replace(crc=0, batch_length=0)


def test_librdkafka_uncompressed_batch_is_byte_identical(librdkafka_batches: dict[tuple[str, int], Captured]) -> None:
    blob = librdkafka_batches["none", 7].records
    header = read_batch_header(blob)
    rebuilt = build_batch(
        decode_records(blob, 0, header),
        base_timestamp=header.base_timestamp,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    assert rebuilt == blob


@pytest.mark.parametrize("magic", [1, 0])
@pytest.mark.parametrize("codec", RDK_CODECS[:-1])
def test_librdkafka_legacy_message_sets(
    librdkafka_batches: dict[tuple[str, int], Captured], codec: str, magic: int
) -> None:
    captured = librdkafka_batches[codec, 2 if magic == 1 else 1]
    blob = captured.records
    with pytest.raises(InvalidRecordError, match="magic"):
        list(iter_batches(blob))
    entries = list(iter_batches(blob, allow_legacy=True))
    assert {h.magic for _, h in entries} == {magic}
    assert {h.compression for _, h in entries} == {CODEC_IDS[codec]}
    for pos, header in entries:
        validate_batch(blob, pos, header)
    messages = decode_legacy_message_set(blob)
    assert [(m.key, m.value) for m in messages] == [(k, v) for k, v, _ in RDK_MESSAGES]
    expected_ts = [TS + 7 * i if magic else -1 for i in range(len(RDK_MESSAGES))]
    assert [m.timestamp for m in messages] == expected_ts
    # Kafka up-converts such a produce to v2; so can we.
    v2 = convert_legacy_to_v2(blob)
    pos, header = _validated(v2)
    assert [(r.key, r.value, r.timestamp(header)) for r in decode_records(v2, pos, header)] == [
        (k, v, t) for (k, v, _), t in zip(RDK_MESSAGES, expected_ts, strict=True)
    ]


def test_capture_covers_every_codec(librdkafka_batches: dict[tuple[str, int], Captured]) -> None:
    seen = set()
    for (codec, _), captured in librdkafka_batches.items():
        seen |= {(codec, h.magic, h.compression) for _, h in iter_batches(captured.records, allow_legacy=True)}
    assert len(seen) == 5 + 4 + 4
    assert all(CODEC_IDS[codec] == compression for codec, _, compression in seen)
