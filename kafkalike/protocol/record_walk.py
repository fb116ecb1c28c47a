"""One pass over the records of a v2 batch, checking them as Kafka's broker reads them.

``walk`` reads up to ``count`` records from ``data[pos:]`` in one call and returns what the
append needs (how many records parsed, the largest timestamp, whether the offset deltas run
0, 1, 2...) or the first structural fault, plus the per-record faults Kafka reports as
RecordError entries (a missing key on a compacted topic, a timestamp out of range, LogAppendTime
set by a producer). It does not decompress: the caller feeds it decompressed bytes, in pieces if
it likes (``final`` false: a record cut short at the end asks for more instead of failing).

Three ways of reading, because Kafka reads records three ways and each refuses slightly different
bytes (``DefaultRecord.readFrom`` and ``readPartiallyFrom``):

- ``MODE_BUFFER``: an uncompressed batch. Each record's length must hold its fields exactly; a
  length varint cut short is INVALID_RECORD, one longer than 5 bytes escapes Kafka's handler as an
  unexpected error (``STATUS_UNKNOWN``, answered UNKNOWN_SERVER_ERROR).
- ``MODE_STREAM``: a decompressed stream read record by record into a buffer of the declared
  length, then parsed as above (Kafka's path when it rebuilds the batch).
- ``MODE_STREAM_PARTIAL``: a decompressed stream whose fields are skipped, not kept (Kafka's path
  when the compressed batch is stored as it came). The declared length is read and then ignored.

Varints follow Kafka's ``ByteUtils``: at most 5 bytes (int32) or 10 (int64), high bits of the
last byte dropped, zigzag-decoded; sums of timestamps wrap as Java longs do.

The module prefers the compiled ``_recordwalk`` extension (one C call, no Python loop per record);
``walk_py`` is the reference implementation it is tested against and the fallback where the
extension was not built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

Buffer = bytes | bytearray | memoryview

STATUS_OK: Final = 0  # ``count`` records read; ``pos`` is just past the last
STATUS_NEED_MORE: Final = 1  # ran out of bytes (``final`` false); ``pos`` is the start of the cut record
STATUS_INVALID: Final = 2  # INVALID_RECORD
STATUS_UNKNOWN: Final = 3  # an exception Kafka does not map: UNKNOWN_SERVER_ERROR

MODE_BUFFER: Final = 0
MODE_STREAM: Final = 1
MODE_STREAM_PARTIAL: Final = 2

FAULT_NO_KEY: Final = 1
FAULT_TIMESTAMP_RANGE: Final = 2
FAULT_LOG_APPEND_TIME: Final = 3

NO_TIMESTAMP: Final = -1
LONG_MAX: Final = (1 << 63) - 1

# (record index, fault, timestamp, offset delta, key size, value size); sizes as read (-1: null).
RecordFault = tuple[int, int, int, int, int, int]
# (status, pos, records read, max timestamp, offsets consecutive, faults, reason)
WalkResult = tuple[int, int, int, int, bool, list[RecordFault], str]


def _wrap64(value: int) -> int:
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >= 1 << 63 else value


class _Short(Exception):
    """The bytes ended inside a record."""


class _Fault(Exception):
    """The record is malformed (INVALID_RECORD)."""


class _TooLong(Exception):
    """A varint did not end within its byte limit."""


def _varint(data: Buffer, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    mask = 0xFFFFFFFFFFFFFFFF if max_bytes == 10 else 0xFFFFFFFF
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise _Short
        b = data[pos]
        pos += 1
        if not b & 0x80:
            result = (result | (b << shift)) & mask
            return (result >> 1) ^ -(result & 1), pos
        result |= (b & 0x7F) << shift
        shift += 7
    raise _TooLong


def _parse_body(data: Buffer, p: int, end: int) -> tuple[int, int, int, int]:
    """A record body that must fill ``[p, end)`` exactly: timestamp delta, offset delta, key and value sizes."""
    try:
        if p >= end:
            raise _Fault("record body is empty")
        p += 1  # attributes: v2 records define none that the broker checks
        ts_delta, p = _varint(data, p, end, 10)
        offset_delta, p = _varint(data, p, end, 5)
        key_size, p = _varint(data, p, end, 5)
        if key_size > 0:
            if key_size > end - p:
                raise _Fault("record key runs past the record")
            p += key_size
        value_size, p = _varint(data, p, end, 5)
        if value_size > 0:
            if value_size > end - p:
                raise _Fault("record value runs past the record")
            p += value_size
        headers, p = _varint(data, p, end, 5)
        if headers < 0 or headers > end - p:
            raise _Fault("invalid number of record headers")
        for _ in range(headers):
            name_size, p = _varint(data, p, end, 5)
            if name_size < 0:
                raise _Fault("invalid negative header key size")
            if name_size > end - p:
                raise _Fault("record header key runs past the record")
            p += name_size
            header_size, p = _varint(data, p, end, 5)
            if header_size > 0:
                if header_size > end - p:
                    raise _Fault("record header value runs past the record")
                p += header_size
    except (_Short, _TooLong):
        raise _Fault("invalid record structure") from None
    if p != end:
        raise _Fault("record length does not match its fields")
    return ts_delta, offset_delta, key_size, value_size


def _skip(p: int, size: int, end: int) -> int:
    if size <= 0:
        return p
    if size > end - p:
        raise _Short
    return p + size


def _parse_partial(data: Buffer, p: int, end: int) -> tuple[int, int, int, int, int]:
    """A record read from a stream field by field, its length ignored (Kafka's readPartiallyFrom)."""
    try:
        _, p = _varint(data, p, end, 5)
        if p >= end:
            raise _Short
        p += 1
        ts_delta, p = _varint(data, p, end, 10)
        offset_delta, p = _varint(data, p, end, 5)
        key_size, p = _varint(data, p, end, 5)
        p = _skip(p, key_size, end)
        value_size, p = _varint(data, p, end, 5)
        p = _skip(p, value_size, end)
        headers, p = _varint(data, p, end, 5)
        if headers < 0:
            raise _Fault("invalid number of record headers")
        for _ in range(headers):
            name_size, p = _varint(data, p, end, 5)
            if name_size < 0:
                raise _Fault("invalid negative header key size")
            p = _skip(p, name_size, end)
            header_size, p = _varint(data, p, end, 5)
            p = _skip(p, header_size, end)
    except _TooLong:
        raise _Fault("invalid record structure") from None
    return p, ts_delta, offset_delta, key_size, value_size


def walk_py(
    data: Buffer,
    pos: int,
    count: int,
    mode: int,
    final: bool,
    index_base: int,
    compacted: bool,
    create_time: bool,
    batch_log_append_time: bool,
    base_timestamp: int,
    batch_max_timestamp: int,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
) -> WalkResult:
    """The reference walk; the compiled one returns the same for the same arguments.

    ``index_base`` is the index of the record at ``pos`` within the batch (records read before);
    ``create_time`` the topic's timestamp type; the other settings are the batch's header fields.
    """
    end = len(data)
    max_ts = NO_TIMESTAMP
    consecutive = True
    faults: list[RecordFault] = []
    done = 0
    while done < count:
        start = pos
        index = index_base + done
        try:
            if mode == MODE_STREAM_PARTIAL:
                pos, ts_delta, offset_delta, key_size, value_size = _parse_partial(data, pos, end)
            else:
                try:
                    size, p = _varint(data, pos, end, 5)
                except _TooLong:
                    if mode == MODE_BUFFER:
                        return STATUS_UNKNOWN, start, done, max_ts, consecutive, faults, "record length varint too long"
                    raise _Fault("invalid record length") from None
                if size < 0:
                    raise _Fault("invalid record length")
                if size > end - p:
                    if mode == MODE_BUFFER:
                        raise _Fault("record length runs past the batch")
                    raise _Short
                ts_delta, offset_delta, key_size, value_size = _parse_body(data, p, p + size)
                pos = p + size
        except _Short:
            if mode == MODE_BUFFER:
                return STATUS_INVALID, start, done, max_ts, consecutive, faults, "batch ends inside a record"
            if final:
                return STATUS_INVALID, start, done, max_ts, consecutive, faults, "stream ends inside a record"
            return STATUS_NEED_MORE, start, done, max_ts, consecutive, faults, ""
        except _Fault as exc:
            return STATUS_INVALID, start, done, max_ts, consecutive, faults, str(exc)
        ts = batch_max_timestamp if batch_log_append_time else _wrap64(base_timestamp + ts_delta)
        if compacted and key_size < 0:
            faults.append((index, FAULT_NO_KEY, ts, offset_delta, key_size, value_size))
        elif create_time and ts != NO_TIMESTAMP:
            diff = _wrap64(now_ms - ts)
            if diff > before_max_ms or _wrap64(-diff) > after_max_ms:
                faults.append((index, FAULT_TIMESTAMP_RANGE, ts, offset_delta, key_size, value_size))
        elif batch_log_append_time:
            faults.append((index, FAULT_LOG_APPEND_TIME, ts, offset_delta, key_size, value_size))
        max_ts = max(ts, max_ts)
        if offset_delta != index:
            consecutive = False
        done += 1
    return STATUS_OK, pos, done, max_ts, consecutive, faults, ""


def _native_walk() -> Callable[..., WalkResult] | None:
    try:
        from kafkalike.protocol._recordwalk import walk as native
    except ImportError:  # no compiler where it was installed: the reference walk does the same, slower
        return None
    return native


_NATIVE = _native_walk()
NATIVE: Final = _NATIVE is not None
walk: Callable[..., WalkResult] = _NATIVE if _NATIVE is not None else walk_py


__all__ = [
    "FAULT_LOG_APPEND_TIME",
    "FAULT_NO_KEY",
    "FAULT_TIMESTAMP_RANGE",
    "MODE_BUFFER",
    "MODE_STREAM",
    "MODE_STREAM_PARTIAL",
    "NATIVE",
    "STATUS_INVALID",
    "STATUS_NEED_MORE",
    "STATUS_OK",
    "STATUS_UNKNOWN",
    "walk",
    "walk_py",
]
