"""What a Produce request's records must be before a partition stores them, checked as Kafka does.

``validate_produce_records`` is the one entry point: the records field of one partition in, and
either a ``ValidBatch`` (what to append, how many records, the max timestamp, whether the batch was
rebuilt) or a ``RecordsRefused`` carrying Kafka's error code, its ``error_message``, its RecordError
entries and whether the answer carries the log start offset. The order of the checks, the error
each one gets and the bytes each one refuses follow Apache Kafka 4.x, in three steps:

1. the request (``ProduceRequest.validateRecords``): exactly one batch, magic 2, no zstd before v7.
   Bytes after the first batch too short to be one are not a second batch; Kafka drops them, so
   the append takes the first batch only. Refused here: no log start offset, no message.
2. the log (``UnifiedLog.analyzeAndValidateRecords``): base offset 0, ``max.message.bytes``, the
   CRC, a known codec.
3. every record (``LogValidator``, ``DefaultRecordBatch``, ``DefaultRecord``): the header's count
   against its offset range, no control batches, a sequence with a producer id, then each record
   read (decompressing, as a stream: reading stops at the first bad record, or as soon as bytes
   are left over after the declared count, so a decompression bomb inflates little) and checked
   for a key on compacted topics and a timestamp within ``message.timestamp.before/after.max.ms``.
   Record faults are all collected and answered as RecordError entries with Kafka's messages; a
   malformed record is INVALID_RECORD, a broken codec stream UNKNOWN_SERVER_ERROR (Kafka lets the
   decompressor's IOException through unmapped).

A topic ``compression.type`` other than ``producer`` and other than the batch's codec makes Kafka
rebuild the batch with the topic's codec and offsets 0..n-1; so does this (in Python: rare).
Kafka stores every other batch as it came, with its max timestamp set from the records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import crc32c

from kafkalike.protocol import compression as _compression
from kafkalike.protocol import record_walk as _walk
from kafkalike.protocol.errors import CorruptRecordError, ErrorCode, ProtocolError
from kafkalike.protocol.records import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CRC_START,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    Buffer,
    Record,
    RecordBatchHeader,
    batch_crc_ok,
    build_batch,
    decode_record_bytes,
    read_batch_header,
)

LONG_MAX = (1 << 63) - 1
# Kafka 4.x defaults of log.message.timestamp.before.max.ms / after.max.ms.
DEFAULT_TIMESTAMP_BEFORE_MAX_MS = LONG_MAX
DEFAULT_TIMESTAMP_AFTER_MAX_MS = 3_600_000
# The smallest entry Kafka's batch iterator accepts (a magic 0 message's overhead).
_MIN_ENTRY_SIZE = 14
_ENTRY_SIZE = struct.Struct(">i")  # an entry's size field, after its base offset
_HEADER_UP_TO_MAGIC = 17
# Decompressed bytes handed to the record walk per call; a batch smaller than this takes one call.
_CHUNK_BYTES = 4 * 1024 * 1024
_TARGET_CODECS = {
    "uncompressed": _compression.NONE,
    "gzip": _compression.GZIP,
    "snappy": _compression.SNAPPY,
    "lz4": _compression.LZ4,
    "zstd": _compression.ZSTD,
}


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """The topic configs validation reads, by Kafka's names."""

    compacted: bool = False  # cleanup.policy contains compact
    max_message_bytes: int = 1_048_588
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    timestamp_before_max_ms: int = DEFAULT_TIMESTAMP_BEFORE_MAX_MS
    timestamp_after_max_ms: int = DEFAULT_TIMESTAMP_AFTER_MAX_MS
    compression_type: str = "producer"
    # Decompressed bytes one batch may reach; Kafka has no such limit, this broker refuses past it.
    max_uncompressed_bytes: int = _compression.DEFAULT_MAX_OUTPUT


@dataclass(frozen=True, slots=True)
class ValidBatch:
    """A batch to append: ``records`` is a writable buffer holding it alone (the request's bytes,
    trailing ones cut off, or a rebuilt batch), its header stamped with ``max_timestamp``."""

    records: bytearray | memoryview
    header: RecordBatchHeader
    record_count: int
    max_timestamp: int
    rebuilt: bool


@dataclass(frozen=True)
class RecordError:
    batch_index: int
    message: str


class RecordsRefused(Exception):
    """The partition's answer: ``code``, ``error_message`` (null unless Kafka sets one) and
    ``record_errors``; ``with_log_start`` when Kafka's answer carries the log start offset.
    ``str()`` is the reason, for the log line."""

    def __init__(
        self,
        code: ErrorCode,
        reason: str,
        *,
        with_log_start: bool = True,
        error_message: str | None = None,
        record_errors: list[RecordError] | None = None,
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.with_log_start = with_log_start
        self.error_message = error_message
        self.record_errors: list[RecordError] = record_errors or []


@dataclass
class _WalkState:
    done: int = 0
    max_timestamp: int = -1
    consecutive: bool = True
    faults: list[_walk.RecordFault] = field(default_factory=list)


def validate_produce_records(
    records: Buffer,
    settings: TopicSettings,
    *,
    now_ms: int,
    api_version: int,
    topic_partition: str,
    request_checked: bool = False,
) -> ValidBatch:
    """The partition's one batch, checked and ready to append; raises ``RecordsRefused``.

    ``topic_partition`` ("topic-0") appears in Kafka's messages. A writable ``records`` buffer is
    stamped in place; anything else is copied once. ``request_checked``: ``check_request_records``
    passed these records already (the handler's first step), so its checks are not run twice.
    """
    buf = records if isinstance(records, bytearray | memoryview) and not memoryview(records).readonly else None
    view = memoryview(buf if buf is not None else bytearray(records)).cast("B")
    size = _checked_size(view) if request_checked else _request_checks(view, api_version)
    batch = view[:size]
    header = _log_checks(batch, settings, topic_partition)
    return _validate_records(batch, header, settings, now_ms, topic_partition)


# What a stored batch is read with: no topic policy (key, timestamp range) applies any more.
_STORED = TopicSettings(timestamp_after_max_ms=LONG_MAX)


def check_stored_batch(batch: memoryview, header: RecordBatchHeader) -> None:
    """The records of a batch already in a log (``batch`` holds it alone, its CRC checked), read
    with the walk produce validation reads them with, as produce stored them: an uncompressed batch
    record by record, lengths checked; a compressed one as the decompressed stream Kafka keeps,
    field by field (its record lengths unread). Raises ``RecordsRefused`` with the walk's reason
    for the first fault. The header checks of a produced batch do not apply: the log holds
    control batches, and batches that compaction emptied or thinned."""
    if header.compression not in _compression.CODEC_NAMES:
        raise RecordsRefused(ErrorCode.UNKNOWN_SERVER_ERROR, f"unknown compression codec {header.compression}")
    mode = _walk.MODE_BUFFER if header.compression == _compression.NONE else _walk.MODE_STREAM_PARTIAL
    _walk_batch(batch, header, _STORED, 0, mode)


_UNEXPECTED = "The server experienced an unexpected error when processing the request."


def request_fault(records: Buffer | None, *, api_version: int, topic_exists: bool) -> RecordsRefused | None:
    """A fault in one partition's records that fails the whole Produce request in Kafka, which then
    answers every partition with it (``error_message`` set) and appends nothing.

    Kafka reads the first entry of every partition before anything else (to see whether the request
    is transactional): an entry whose size or magic is impossible throws there. And before v7 its
    zstd check reads the codec of an existing topic's batch, which throws for codecs 5-7.
    """
    if not records:
        return None
    view = memoryview(records).cast("B")
    try:
        size = _entry_size(view, 0)
    except RecordsRefused as exc:
        return RecordsRefused(exc.code, str(exc), with_log_start=False, error_message=str(exc))
    old_version = topic_exists and api_version < 7
    if size is not None and old_version and view[16] == 2 and size > CRC_START + 1 and view[CRC_START + 1] & 0x07 > 4:
        return RecordsRefused(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "unknown codec before v7",
            with_log_start=False,
            error_message=_UNEXPECTED,
        )
    return None


def _entry_size(view: memoryview, pos: int) -> int | None:
    """The size of the entry at ``pos`` as Kafka's batch iterator sees it; None: no whole entry."""
    remaining = len(view) - pos
    if remaining < LOG_OVERHEAD:
        return None
    size: int = _ENTRY_SIZE.unpack_from(view, pos + 8)[0]
    if size < _MIN_ENTRY_SIZE:
        raise RecordsRefused(
            ErrorCode.CORRUPT_MESSAGE,
            f"Record size {size} is less than the minimum record overhead ({_MIN_ENTRY_SIZE})",
            with_log_start=False,
        )
    if remaining < _HEADER_UP_TO_MAGIC:
        return None
    magic = view[pos + 16]
    if magic > 127:  # a signed byte
        magic -= 256
    if magic < 0 or magic > 2:
        raise RecordsRefused(ErrorCode.CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}", with_log_start=False)
    if remaining < size + LOG_OVERHEAD:
        return None
    return size + LOG_OVERHEAD


def check_request_records(records: Buffer | None, *, api_version: int) -> Buffer:
    """``records``, once Kafka's ProduceRequest.validateRecords passes them: one whole v2 batch (zstd
    from v7). Kafka runs it before anything but the topic's existence (acks, internal topics,
    leadership come after); ``validate_produce_records`` runs it too. Raises ``RecordsRefused``."""
    if records is None:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, "no records", with_log_start=False)
    _request_checks(memoryview(records).cast("B"), api_version)
    return records


def _checked_size(view: memoryview) -> int:
    """The size of the one batch of records ``_request_checks`` passed."""
    size: int = _ENTRY_SIZE.unpack_from(view, 8)[0]
    return size + LOG_OVERHEAD


def _request_checks(view: memoryview, api_version: int) -> int:
    size = _entry_size(view, 0)
    if size is None:
        raise RecordsRefused(
            ErrorCode.INVALID_RECORD, "no whole record batch in the partition's records", with_log_start=False
        )
    if view[16] != 2:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, f"record batch magic {view[16]} is not 2", with_log_start=False)
    codec = view[CRC_START + 1] & 0x07 if size > CRC_START + 1 else 0
    if api_version < 7 and codec == _compression.ZSTD:
        raise RecordsRefused(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce v{api_version} may not use zstd",
            with_log_start=False,
        )
    if _entry_size(view, size) is not None:
        raise RecordsRefused(
            ErrorCode.INVALID_RECORD, "more than one record batch for the partition", with_log_start=False
        )
    return size


def _log_checks(batch: memoryview, settings: TopicSettings, topic_partition: str) -> RecordBatchHeader:
    base_offset = int.from_bytes(batch[0:8], "big", signed=True)
    if base_offset != 0:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, f"the base offset of the batch is {base_offset}, not 0")
    if len(batch) > settings.max_message_bytes:
        raise RecordsRefused(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch size in the append to {topic_partition} is {len(batch)} bytes which exceeds "
            f"the maximum configured value of {settings.max_message_bytes}.",
            with_log_start=False,
        )
    try:
        header = read_batch_header(batch)
    except ProtocolError:
        header = None
    if header is None or not batch_crc_ok(batch, 0, header):
        raise RecordsRefused(ErrorCode.CORRUPT_MESSAGE, "record batch is corrupt (CRC mismatch)", with_log_start=False)
    if header.compression not in _compression.CODEC_NAMES:
        # Kafka's CompressionType.forId throws an exception its handler does not map.
        raise RecordsRefused(ErrorCode.UNKNOWN_SERVER_ERROR, f"unknown compression codec {header.compression}")
    return header


def _header_checks(header: RecordBatchHeader) -> None:
    if header.last_offset_delta + 1 <= 0:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, "batch has an invalid offset range")
    if header.records_count <= 0:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, f"invalid reported count {header.records_count}")
    if header.records_count != header.last_offset_delta + 1:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, "inconsistent batch offset range and count of records")
    if header.is_control:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, "clients may not write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, f"invalid sequence number {header.base_sequence}")


def _validate_records(
    batch: memoryview, header: RecordBatchHeader, settings: TopicSettings, now_ms: int, topic_partition: str
) -> ValidBatch:
    source = header.compression
    target = _TARGET_CODECS.get(settings.compression_type, source)
    _header_checks(header)
    if source == _compression.NONE:
        mode = _walk.MODE_BUFFER
    elif source == target:
        mode = _walk.MODE_STREAM_PARTIAL
    else:
        mode = _walk.MODE_STREAM
    state = _walk_batch(batch, header, settings, now_ms, mode)
    if state.faults:
        raise _record_errors(state.faults, mode, settings, now_ms, topic_partition)
    if source == target:
        if not state.consecutive and mode == _walk.MODE_STREAM_PARTIAL:
            # Kafka would rebuild from records it read without keys and values, and fails doing so.
            raise RecordsRefused(ErrorCode.UNKNOWN_SERVER_ERROR, "compressed batch with non-consecutive inner offsets")
        if _stamp_max_timestamp(batch, header, state.max_timestamp):
            header = read_batch_header(batch)
        return ValidBatch(batch, header, state.done, state.max_timestamp, rebuilt=False)
    rebuilt = bytearray(_rebuild(batch, header, target))
    return ValidBatch(rebuilt, read_batch_header(rebuilt), state.done, state.max_timestamp, rebuilt=True)


def _walk_batch(
    batch: memoryview, header: RecordBatchHeader, settings: TopicSettings, now_ms: int, mode: int
) -> _WalkState:
    state = _WalkState()
    args = (
        settings.compacted,
        not settings.log_append_time,
        header.log_append_time,
        header.base_timestamp,
        header.max_timestamp,
        now_ms,
        settings.timestamp_before_max_ms,
        settings.timestamp_after_max_ms,
    )
    payload = batch[BATCH_HEADER_SIZE:]
    if mode == _walk.MODE_BUFFER:
        status, pos, done, max_ts, consecutive, faults, reason = _walk.walk(
            payload, 0, header.records_count, mode, True, 0, *args
        )
        _merge(state, done, max_ts, consecutive, faults)
        _check_status(status, reason)
        if pos != len(payload):
            raise RecordsRefused(ErrorCode.INVALID_RECORD, "records still remaining after the declared count")
        return state
    chunks = _chunks(header.compression, payload, settings.max_uncompressed_bytes)
    data: bytes | bytearray = b""
    while True:
        more = next(chunks, None)
        final = more is None
        if more is not None:
            if data:
                data += more  # the bytearray kept for a cut record: grows in place
            else:
                data = more  # one piece (most batches): no copy
        status, pos, done, max_ts, consecutive, faults, reason = _walk.walk(
            data, 0, header.records_count - state.done, mode, final, state.done, *args
        )
        _merge(state, done, max_ts, consecutive, faults)
        if status == _walk.STATUS_NEED_MORE:
            data = bytearray(memoryview(data)[pos:])  # keep only the record that was cut
            continue
        _check_status(status, reason)
        # The declared count is read: any byte the stream still holds is one too many.
        if pos < len(data) or (not final and next(chunks, None) is not None):
            raise RecordsRefused(ErrorCode.INVALID_RECORD, "records still remaining after the declared count")
        return state


def _chunks(codec: int, payload: memoryview, max_output: int) -> Iterator[bytes]:
    """Decompressed pieces; a broken stream ends the validation with Kafka's unmapped error."""
    try:
        yield from _compression.decompress_stream(codec, payload, max_output=max_output, chunk_bytes=_CHUNK_BYTES)
    except CorruptRecordError as exc:
        raise RecordsRefused(ErrorCode.UNKNOWN_SERVER_ERROR, f"failed to decompress the record stream: {exc}") from None


def _merge(state: _WalkState, done: int, max_ts: int, consecutive: bool, faults: list[_walk.RecordFault]) -> None:
    state.done += done
    state.max_timestamp = max(state.max_timestamp, max_ts)
    state.consecutive = state.consecutive and consecutive
    state.faults += faults


def _check_status(status: int, reason: str) -> None:
    if status == _walk.STATUS_INVALID:
        raise RecordsRefused(ErrorCode.INVALID_RECORD, reason)
    if status == _walk.STATUS_UNKNOWN:
        raise RecordsRefused(ErrorCode.UNKNOWN_SERVER_ERROR, reason)


def _wrap64(value: int) -> int:
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


def _record_errors(
    faults: list[_walk.RecordFault], mode: int, settings: TopicSettings, now_ms: int, topic_partition: str
) -> RecordsRefused:
    """Kafka's RecordValidationException: one RecordError per faulty record, its messages word for word."""
    errors: list[RecordError] = []
    for index, fault, ts, offset_delta, key_size, value_size in faults:
        if fault == _walk.FAULT_NO_KEY:
            message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
        elif fault == _walk.FAULT_TIMESTAMP_RANGE:
            low = _wrap64(now_ms - settings.timestamp_before_max_ms)
            high = _wrap64(now_ms + settings.timestamp_after_max_ms)
            message = (
                f"Timestamp {ts} of message with offset {offset_delta} is out of range. "
                f"The timestamp should be within [{low}, {high}]"
            )
        else:
            if mode == _walk.MODE_STREAM_PARTIAL:
                record = f"PartialDefaultRecord(offset={offset_delta}, timestamp={ts}, key={key_size} bytes, value={value_size} bytes)"
            else:
                record = f"DefaultRecord(offset={offset_delta}, timestamp={ts}, key={max(key_size, 0)} bytes, value={max(value_size, 0)} bytes)"
            message = (
                f"Invalid timestamp type in message {record}. Producer should not set timestamp type to LogAppendTime."
            )
        errors.append(RecordError(index, message))
    # Both timestamp faults are INVALID_TIMESTAMP in Kafka's ApiRecordError; one of them decides the code.
    if any(fault != _walk.FAULT_NO_KEY for _, fault, *_ in faults):
        code, summary = ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp"
    else:
        shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')" for e in errors[:3])
        code = ErrorCode.INVALID_RECORD
        summary = (
            f"One or more records have been rejected due to {len(errors)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]"
        )
    return RecordsRefused(code, summary, error_message=summary, record_errors=errors)


def _stamp_max_timestamp(batch: memoryview, header: RecordBatchHeader, max_timestamp: int) -> bool:
    """Kafka's setMaxTimestamp(CreateTime, max of the records) on a batch stored as it came;
    False when the batch already says so (and was left as it was)."""
    if header.max_timestamp == max_timestamp and not header.log_append_time:
        return False
    attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
    batch[CRC_START : CRC_START + 2] = attributes.to_bytes(2, "big", signed=True)
    batch[35:43] = max_timestamp.to_bytes(8, "big", signed=True)
    batch[CRC_OFFSET:CRC_START] = crc32c.crc32c(batch[CRC_START:]).to_bytes(4, "big")
    return True


def _rebuild(batch: memoryview, header: RecordBatchHeader, target: int) -> bytes:
    """The batch re-encoded with ``target``, offsets 0..n-1, as Kafka's MemoryRecordsBuilder writes it."""
    payload = batch[BATCH_HEADER_SIZE:]
    if header.compression != _compression.NONE:
        payload = memoryview(_compression.decompress(header.compression, payload))
    decoded = decode_record_bytes(payload, header.records_count)
    if header.log_append_time:
        timestamps = [header.max_timestamp] * len(decoded)
    else:
        timestamps = [_wrap64(header.base_timestamp + r.timestamp_delta) for r in decoded]
    base_ts = timestamps[0] if timestamps else -1
    records = [
        Record(0, _wrap64(ts - base_ts), i, r.key, r.value, r.headers)
        for i, (r, ts) in enumerate(zip(decoded, timestamps, strict=True))
    ]
    return build_batch(
        records,
        compression=target,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        base_timestamp=base_ts,
        max_timestamp=max(timestamps, default=-1),
    )


__all__ = [
    "DEFAULT_TIMESTAMP_AFTER_MAX_MS",
    "DEFAULT_TIMESTAMP_BEFORE_MAX_MS",
    "RecordError",
    "RecordsRefused",
    "TopicSettings",
    "ValidBatch",
    "check_request_records",
    "check_stored_batch",
    "request_fault",
    "validate_produce_records",
]
