"""Produce validation alone: every hostile payload gets Apache Kafka's answer (the codes are
checked against Kafka by compat_tests/differential/test_produce_validation.py), with the compiled
record walk and with the pure-Python one; the messages are Kafka's; bombs inflate little; batches
Kafka rebuilds are rebuilt."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkalike.protocol import compression, record_walk, validation
from kafkalike.protocol.compression import GZIP, LZ4, NONE, ZSTD
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, batch_crc_ok, build_batch, decode_records, read_batch_header
from kafkalike.protocol.validation import RecordsRefused, TopicSettings, request_fault, validate_produce_records
from kafkalike.testing.hostile_batches import ACCEPTED, CASES, HOUR_MS, HostileCase, patched, valid_batch

NOW_MS = 1_800_000_000_000
PER_PARTITION = [c for c in CASES if not c.whole_request]
WHOLE_REQUEST = [c for c in CASES if c.whole_request]


def settings_for(case: HostileCase) -> TopicSettings:
    configs = case.configs
    return TopicSettings(
        compacted="compact" in configs.get("cleanup.policy", ""),
        log_append_time=configs.get("message.timestamp.type") == "LogAppendTime",
        timestamp_before_max_ms=int(configs.get("message.timestamp.before.max.ms", validation.LONG_MAX)),
        compression_type=configs.get("compression.type", "producer"),
    )


def validate(
    records: bytes | bytearray, settings: TopicSettings | None = None, api_version: int = 9
) -> validation.ValidBatch:
    return validate_produce_records(
        records, settings or TopicSettings(), now_ms=NOW_MS, api_version=api_version, topic_partition="t-0"
    )


@pytest.fixture(params=["compiled", "python"])
def walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the compiled walk (where built) and with the reference walk."""
    if request.param == "python":
        monkeypatch.setattr(record_walk, "walk", record_walk.walk_py)
    return str(request.param)


@pytest.mark.parametrize("case", PER_PARTITION, ids=[c.name for c in PER_PARTITION])
def test_each_hostile_batch_gets_kafkas_answer(case: HostileCase, walk: str) -> None:
    records = case.make(NOW_MS)
    with pytest.raises(RecordsRefused) as info:
        validate(records, settings_for(case), case.api_version)
    refused = info.value
    assert (refused.code, refused.with_log_start, len(refused.record_errors)) == (
        case.code,
        case.with_log_start,
        case.record_errors,
    )
    # Kafka sets error_message only with RecordError entries.
    assert (refused.error_message is not None) == bool(case.record_errors)
    assert request_fault(records, api_version=case.api_version, topic_exists=True) is None


@pytest.mark.parametrize("case", WHOLE_REQUEST, ids=[c.name for c in WHOLE_REQUEST])
def test_faults_that_fail_the_whole_request(case: HostileCase) -> None:
    fault = request_fault(case.make(NOW_MS), api_version=case.api_version, topic_exists=True)
    assert fault is not None
    assert (fault.code, fault.with_log_start) == (case.code, case.with_log_start)
    assert fault.error_message  # ApiError's message, on every partition


def test_whole_request_fault_messages_are_kafkas() -> None:
    magic = request_fault(patched(valid_batch(NOW_MS), 16, ">b", 7), api_version=9, topic_exists=True)
    assert magic is not None and magic.error_message == "Invalid magic found in record: 7"
    small = request_fault(bytes(8) + b"\x00\x00\x00\x03" + bytes(20), api_version=9, topic_exists=True)
    assert small is not None
    assert small.error_message == "Record size 3 is less than the minimum record overhead (14)"
    # The codec is read before v7 only, and only for a topic that exists.
    codec_7 = patched(valid_batch(NOW_MS), 21, ">h", 7)
    assert request_fault(codec_7, api_version=7, topic_exists=True) is None
    assert request_fault(codec_7, api_version=5, topic_exists=False) is None


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.name for c in ACCEPTED])
def test_odd_batches_kafka_accepts_are_accepted(case: HostileCase, walk: str) -> None:
    valid = validate(case.make(NOW_MS), settings_for(case))
    assert valid.record_count == valid.header.records_count
    assert len(valid.records) == valid.header.size  # bytes after the batch are not stored
    assert batch_crc_ok(valid.records, 0, valid.header)


@pytest.mark.parametrize("codec", [NONE, GZIP, 2, LZ4, ZSTD])
def test_valid_batches_of_every_codec_are_accepted_as_they_are(codec: int, walk: str) -> None:
    batch = valid_batch(NOW_MS, 50, codec)
    valid = validate(bytearray(batch))
    assert (valid.record_count, valid.max_timestamp, valid.rebuilt) == (50, NOW_MS + 49, False)
    assert bytes(valid.records) == batch


def test_record_error_messages_are_kafkas() -> None:
    compacted = TopicSettings(compacted=True)
    with pytest.raises(RecordsRefused) as info:
        validate(build_batch([Record(value=b"v"), Record(key=b"k", value=b"v")], base_timestamp=NOW_MS), compacted)
    message = "Compacted topic cannot accept message without key in topic partition t-0"
    assert [(e.batch_index, e.message) for e in info.value.record_errors] == [(0, message)]
    assert info.value.error_message == (
        "One or more records have been rejected due to 1 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=0, message='{message}')]"
    )
    with pytest.raises(RecordsRefused) as info:
        validate(valid_batch(NOW_MS + 2 * HOUR_MS, 1))
    assert info.value.error_message == "One or more records have been rejected due to invalid timestamp"
    assert info.value.record_errors[0].message == (
        f"Timestamp {NOW_MS + 2 * HOUR_MS} of message with offset 0 is out of range. The timestamp should be "
        f"within [{NOW_MS - validation.LONG_MAX}, {NOW_MS + HOUR_MS}]"
    )


@pytest.mark.parametrize(
    ("codec", "record"),
    [
        (NONE, "DefaultRecord(offset=0, timestamp=-1, key=5 bytes, value=7 bytes)"),
        # Kafka reads a compressed batch it stores as is without keeping keys and values.
        (ZSTD, "PartialDefaultRecord(offset=0, timestamp=-1, key=5 bytes, value=7 bytes)"),
    ],
)
def test_log_append_time_from_a_producer_names_the_record_as_kafka_does(codec: int, record: str) -> None:
    batch = build_batch([Record(key=b"key-0", value=b"value-0")], compression=codec, timestamp_type=1, max_timestamp=-1)
    with pytest.raises(RecordsRefused) as info:
        validate(batch)
    assert info.value.code == ErrorCode.INVALID_TIMESTAMP
    assert info.value.record_errors[0].message == (
        f"Invalid timestamp type in message {record}. Producer should not set timestamp type to LogAppendTime."
    )


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Decompressed bytes handed out by every stream, recorded as they are produced."""
    inflated: list[int] = []
    real = compression.decompress_stream

    def counting(*args: object, **kwargs: object) -> Iterator[bytes]:
        for chunk in real(*args, **kwargs):  # type: ignore[arg-type]
            inflated.append(len(chunk))
            yield chunk

    monkeypatch.setattr(compression, "decompress_stream", counting)
    return inflated


@pytest.mark.parametrize("case", [c for c in CASES if c.slow], ids=[c.name for c in CASES if c.slow])
def test_a_decompression_bomb_is_refused_after_inflating_little(
    case: HostileCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = case.make(NOW_MS)
    inflated = _counting(monkeypatch)
    with pytest.raises(RecordsRefused) as info:
        validate(records)
    assert info.value.code == ErrorCode.INVALID_RECORD  # "records still remaining", as Kafka
    assert 0 < sum(inflated) < 64 << 20  # of 800 MiB or 1 GiB
    # Negative control: the counter sees a whole stream when one is read to the end.
    inflated.clear()
    list(compression.decompress_stream(ZSTD, compression.compress(ZSTD, bytes(100 << 20))))
    assert sum(inflated) == 100 << 20


def test_inflating_past_the_bound_is_refused() -> None:
    records = [Record(value=bytes(1 << 20)) for _ in range(3)]
    batch = build_batch(records, base_timestamp=NOW_MS, compression=ZSTD)
    with pytest.raises(RecordsRefused) as info:
        validate(batch, TopicSettings(max_uncompressed_bytes=2 << 20))
    assert info.value.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert validate(batch).record_count == 3


@pytest.mark.parametrize(("source", "target"), [(LZ4, "gzip"), (NONE, "zstd"), (GZIP, "uncompressed")])
def test_a_topic_codec_other_than_the_batchs_rebuilds_it(source: int, target: str, walk: str) -> None:
    records = [
        Record(key=b"k%d" % i, value=None if i == 1 else b"v%d" % i, timestamp_delta=5 * i, headers=[("h", b"x")])
        for i in range(4)
    ]
    batch = build_batch(
        records, base_timestamp=NOW_MS, compression=source, producer_id=7, producer_epoch=1, base_sequence=3
    )
    valid = validate(batch, TopicSettings(compression_type=target))
    header = valid.header
    assert valid.rebuilt and header.compression == validation._TARGET_CODECS[target]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 3)
    decoded = decode_records(valid.records, 0, header)
    assert [(r.key, r.value, r.headers, r.offset_delta) for r in decoded] == [
        (r.key, r.value, r.headers, i) for i, r in enumerate(records)
    ]
    assert [r.timestamp(header) for r in decoded] == [NOW_MS + 5 * i for i in range(4)]
    # The same codec, or producer: stored as it came.
    assert not validate(batch, TopicSettings(compression_type=compression.CODEC_NAMES[source])).rebuilt


def test_the_max_timestamp_is_set_from_the_records_as_kafka_does(walk: str) -> None:
    batch = build_batch([Record(value=b"a", timestamp_delta=9), Record(value=b"b")], base_timestamp=NOW_MS)
    lying = patched(batch, 35, ">q", NOW_MS - 5)
    valid = validate(bytearray(lying))
    assert valid.max_timestamp == NOW_MS + 9
    assert read_batch_header(valid.records).max_timestamp == NOW_MS + 9
    assert batch_crc_ok(valid.records, 0, valid.header)


def test_a_stream_cut_inside_a_record_is_read_in_pieces(monkeypatch: pytest.MonkeyPatch, walk: str) -> None:
    # Small pieces make records straddle them: the walk resumes each cut record whole.
    monkeypatch.setattr(validation, "_CHUNK_BYTES", 7)
    records = [Record(key=b"k%d" % i, value=bytes(range(i * 3 % 200)), timestamp_delta=i) for i in range(60)]
    for codec in (GZIP, LZ4, ZSTD):
        assert validate(build_batch(records, base_timestamp=NOW_MS, compression=codec)).record_count == 60
        more = build_batch([*records, Record(value=b"x")], base_timestamp=NOW_MS, compression=codec)
        with pytest.raises(RecordsRefused) as info:
            validate(patched(patched(more, 57, ">i", 60), 23, ">i", 59))
        assert info.value.code == ErrorCode.INVALID_RECORD
