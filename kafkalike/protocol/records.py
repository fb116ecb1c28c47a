"""Record batches (message format v2) and the legacy message sets (magic 0 and 1) before them.

Batch headers are read and checked without touching individual records; records are decoded and
built on demand. All length fields are checked against the bytes actually present before use.

Layout of a v2 batch (big-endian), as on the wire and on disk::

    0  base_offset             int64
    8  batch_length            int32   bytes after this field
    12 partition_leader_epoch  int32
    16 magic                   int8    2
    17 crc                     uint32  CRC-32C of bytes 21..end
    21 attributes              int16   bits 0-2 codec, 3 timestamp type, 4 transactional,
                                       5 control, 6 delete horizon
    23 last_offset_delta       int32
    27 base_timestamp          int64
    35 max_timestamp           int64
    43 producer_id             int64
    51 producer_epoch          int16
    53 base_sequence           int32
    57 records_count           int32
    61 records...

base_offset and partition_leader_epoch are outside the CRC, so the broker can set them in place.

Each record (varints are zigzag-encoded)::

    length varint, attributes int8, timestamp_delta varlong, offset_delta varint,
    key_length varint (-1 null), key, value_length varint (-1 null), value,
    header_count varint, then per header: key_length varint, key (UTF-8), value_length varint, value
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

import crc32c

from kafkalike.protocol import compression as _compression
from kafkalike.protocol.errors import CorruptRecordError, InvalidRecordError, MalformedRecordError

Buffer = bytes | bytearray | memoryview

BATCH_HEADER_SIZE = 61
# The smallest prefix that tells a batch's size and magic: base_offset, batch_length, epoch, magic.
LOG_OVERHEAD = 12
CRC_OFFSET = 17
CRC_START = 21

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40


class RecordBatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordBatchHeader:
    """The header of the v2 batch at ``pos``; checks only that the header itself is whole and v2."""
    if len(buf) - pos < LOG_OVERHEAD + 5:
        raise CorruptRecordError("record batch truncated before its header")
    magic = buf[pos + 16]
    if magic != 2:
        raise InvalidRecordError(f"record batch magic {magic} is not 2")
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError("record batch truncated inside its header")
    header = RecordBatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} is too small")
    if len(buf) - pos < header.size:
        raise CorruptRecordError("record batch truncated")
    return header


def batch_crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader) -> bool:
    """True when the stored CRC-32C matches the batch bytes (attributes to the end)."""
    view = memoryview(buf)[pos + CRC_START : pos + header.size]
    return crc32c.crc32c(view) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's base offset in place (not covered by the CRC)."""
    _OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place (not covered by the CRC)."""
    _EPOCH.pack_into(buf, pos + 12, epoch)


NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
CURRENT_MAGIC = 2
_MAX_TIMESTAMP_OFFSET = 35
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")
# The smallest record: a length byte, then one byte each for attributes, timestamp and offset deltas,
# key and value lengths and header count.
_MIN_RECORD_SIZE = 7


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: RecordBatchHeader, timestamp: int) -> None:
    """Mark the batch as LogAppendTime with ``timestamp`` as its max timestamp, and refresh the CRC."""
    _ATTRIBUTES.pack_into(buf, pos + CRC_START, header.attributes | TIMESTAMP_TYPE_MASK)
    _TIMESTAMP.pack_into(buf, pos + _MAX_TIMESTAMP_OFFSET, timestamp)
    _CRC.pack_into(buf, pos + CRC_OFFSET, crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + header.size]))


# -- walking a records blob ------------------------------------------------------------------------

# Legacy entries: offset int64, message_size int32, crc uint32, magic int8, attributes int8,
# [timestamp int64 in magic 1], key bytes (int32 length), value bytes (int32 length).
# The CRC is CRC-32 of magic..end. Offset, size and magic sit where a v2 batch keeps them.
_LEGACY_PREFIX = struct.Struct(">qiIbb")
_LEGACY_V0_OVERHEAD = 14  # crc, magic, attributes, key and value lengths
_LEGACY_V1_OVERHEAD = 22  # and the timestamp
_LEGACY_CRC_START = 16
_INT32 = struct.Struct(">i")
_INT32_MAX = 0x7FFFFFFF


def iter_batches(
    buf: Buffer, *, allow_legacy: bool = False, partial_ok: bool = False
) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Each batch's position and header, in order, without decoding records or checking CRCs.

    A batch cut short at the end raises ``CorruptRecordError`` unless ``partial_ok`` (fetch responses
    and log reads may end mid-batch), in which case the walk just stops there. Magic 0 and 1 entries
    raise ``InvalidRecordError`` unless ``allow_legacy``; then they come back as shallow headers from
    ``read_legacy_header`` (``records_count`` -1: unknown without decompressing).
    """
    end = len(buf)
    pos = 0
    while pos < end:
        if end - pos < LOG_OVERHEAD + 5:
            if partial_ok:
                return
            raise CorruptRecordError(f"record batch at byte {pos} truncated before its header")
        (size,) = _INT32.unpack_from(buf, pos + 8)
        if size < _LEGACY_V0_OVERHEAD:
            raise CorruptRecordError(f"record batch size {size} is below the minimum")
        magic = struct.unpack_from(">b", buf, pos + 16)[0]
        if magic < 0 or magic > CURRENT_MAGIC:
            raise CorruptRecordError(f"record batch magic {magic} is unknown")
        if end - pos < size + LOG_OVERHEAD:
            if partial_ok:
                return
            raise CorruptRecordError(f"record batch at byte {pos} truncated: {size + LOG_OVERHEAD} bytes declared")
        if magic < CURRENT_MAGIC:
            if not allow_legacy:
                raise InvalidRecordError(f"message format magic {magic} is not supported, only record batches v2")
            header = read_legacy_header(buf, pos)
        else:
            header = read_batch_header(buf, pos)
        yield pos, header
        pos += header.size


def read_legacy_header(buf: Buffer, pos: int = 0) -> RecordBatchHeader:
    """A magic 0 or 1 entry seen as a batch header, for walking mixed logs.

    ``base_offset`` is the entry's own offset (for a compressed wrapper, that of its last inner
    message), ``crc`` its CRC-32, ``attributes`` its one-byte attributes (codec and timestamp type
    sit in the same bits as in v2), ``records_count`` -1.
    """
    if len(buf) - pos < LOG_OVERHEAD + _LEGACY_V0_OVERHEAD:
        raise CorruptRecordError("message truncated inside its header")
    offset, size, crc, magic, attributes = _LEGACY_PREFIX.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise InvalidRecordError(f"message magic {magic} is not 0 or 1")
    if size < (_LEGACY_V0_OVERHEAD if magic == 0 else _LEGACY_V1_OVERHEAD) or len(buf) - pos < size + LOG_OVERHEAD:
        raise CorruptRecordError(f"message size {size} does not fit magic {magic} or the data")
    timestamp = _TIMESTAMP.unpack_from(buf, pos + 18)[0] if magic == 1 else NO_TIMESTAMP
    return RecordBatchHeader(
        offset, size, -1, magic, crc, attributes & 0xFF, 0, timestamp, timestamp, NO_PRODUCER_ID, -1, NO_SEQUENCE, -1
    )


def validate_batch(buf: Buffer, pos: int, header: RecordBatchHeader, *, from_client: bool = True) -> None:
    """What Kafka's broker checks of a batch before appending it, from the header and CRC alone.

    Always: the CRC (``CorruptRecordError``), a known codec, a record count that fits the offset
    range. For producer batches (``from_client``), as Kafka's LogValidator does: base offset 0, at
    least one record, ``records_count == last_offset_delta + 1``, no control batches, and a base
    sequence whenever a producer id is set. The produce path checks all this and every record
    besides (``protocol/validation.py``).
    """
    if header.magic < CURRENT_MAGIC:
        if not legacy_crc_ok(buf, pos, header):
            raise CorruptRecordError(f"message at offset {header.base_offset} is corrupt (CRC mismatch)")
        if header.compression not in _compression.CODEC_NAMES or header.compression == _compression.ZSTD:
            raise InvalidRecordError(f"compression codec {header.compression} is not valid in magic {header.magic}")
        return
    if from_client and header.base_offset != 0:
        raise InvalidRecordError(f"the base offset of a produced record batch must be 0, not {header.base_offset}")
    if not batch_crc_ok(buf, pos, header):
        raise CorruptRecordError(f"record batch is corrupt (stored crc {header.crc:#010x} does not match)")
    if header.compression not in _compression.CODEC_NAMES:
        raise InvalidRecordError(f"unknown compression codec {header.compression}")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"invalid record count {header.records_count} or last offset delta {header.last_offset_delta}"
        )
    if header.records_count > header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"{header.records_count} records do not fit in offset range [{header.base_offset}, {header.last_offset}]"
        )
    if not from_client:
        return
    if header.records_count == 0 or header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range [0, {header.last_offset_delta}]"
            f" and count of records {header.records_count}"
        )
    if header.is_control:
        raise InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in record batch with producer id {header.producer_id}"
        )


def legacy_crc_ok(buf: Buffer, pos: int, header: RecordBatchHeader) -> bool:
    """True when a magic 0/1 entry's stored CRC-32 matches its bytes (magic to the end)."""
    return zlib.crc32(memoryview(buf)[pos + _LEGACY_CRC_START : pos + header.size]) == header.crc


# -- records inside a v2 batch ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a v2 batch. Its offset is the batch's base offset plus ``offset_delta``; its
    timestamp the base timestamp plus ``timestamp_delta`` (or the max timestamp under LogAppendTime)."""

    attributes: int = 0
    timestamp_delta: int = 0
    offset_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)

    def offset(self, header: RecordBatchHeader) -> int:
        return header.base_offset + self.offset_delta

    def timestamp(self, header: RecordBatchHeader) -> int:
        if header.log_append_time:
            return header.max_timestamp
        return header.base_timestamp + self.timestamp_delta


def batch_payload(
    buf: Buffer, pos: int, header: RecordBatchHeader, *, max_uncompressed: int = _compression.DEFAULT_MAX_OUTPUT
) -> bytes:
    """The batch's record bytes, decompressed."""
    raw = memoryview(buf)[pos + BATCH_HEADER_SIZE : pos + header.size]
    if header.compression == _compression.NONE:
        return bytes(raw)
    return _compression.decompress(header.compression, raw, max_output=max_uncompressed)


def decode_records(
    buf: Buffer, pos: int, header: RecordBatchHeader, *, max_uncompressed: int = _compression.DEFAULT_MAX_OUTPUT
) -> list[Record]:
    """The records of the v2 batch at ``pos``, decompressing as needed.

    Records that do not parse, or that disagree with ``records_count``, raise ``MalformedRecordError``
    (INVALID_RECORD, as Kafka); a stream that does not decompress raises ``CorruptRecordError``.
    """
    if header.magic != CURRENT_MAGIC:
        raise InvalidRecordError(f"record batch magic {header.magic} is not 2")
    return decode_record_bytes(batch_payload(buf, pos, header, max_uncompressed=max_uncompressed), header.records_count)


def decode_record_bytes(data: Buffer, count: int) -> list[Record]:
    """``count`` records from a batch's (decompressed) record bytes, which they must fill exactly.

    Read as Kafka's DefaultRecord reads them: a negative key or value length is null, header keys
    that are not UTF-8 get replacement characters.
    """
    if count < 0 or count > len(data) // _MIN_RECORD_SIZE:
        raise MalformedRecordError(f"record count {count} does not fit in {len(data)} bytes of records")
    data = bytes(data)
    records = []
    p = 0
    end = len(data)
    for _ in range(count):
        length, p = _read_varint(data, p, end)
        if length < 0 or length > end - p:
            raise MalformedRecordError(f"record length {length} runs past the batch")
        record, p = _read_record(data, p, p + length)
        records.append(record)
    if p != end:
        raise MalformedRecordError(f"{end - p} bytes left after the declared {count} records")
    return records


def _read_varint(data: bytes, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """A zigzag varint (``max_bytes`` 5 for int32, 10 for int64) and the position after it."""
    result = 0
    shift = 0
    limit = min(end, pos + max_bytes)
    while pos < limit:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    if pos >= end:
        raise MalformedRecordError("record truncated inside a varint")
    raise MalformedRecordError(f"varint longer than {max_bytes} bytes")


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos, end)
    if length < 0:
        return None, pos
    if length > end - pos:
        raise MalformedRecordError(f"field length {length} runs past its record")
    return data[pos : pos + length], pos + length


def _read_record(data: bytes, pos: int, end: int) -> tuple[Record, int]:
    if pos >= end:
        raise MalformedRecordError("empty record")
    attributes = data[pos]
    timestamp_delta, pos = _read_varint(data, pos + 1, end, 10)
    offset_delta, pos = _read_varint(data, pos, end)
    key, pos = _read_bytes(data, pos, end)
    value, pos = _read_bytes(data, pos, end)
    count, pos = _read_varint(data, pos, end)
    if count < 0 or count > end - pos:
        raise MalformedRecordError(f"invalid number of record headers {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        name, pos = _read_bytes(data, pos, end)
        if name is None:
            raise MalformedRecordError("record header with a null key")
        text = name.decode(errors="replace")
        header_value, pos = _read_bytes(data, pos, end)
        headers.append((text, header_value))
    if pos != end:
        raise MalformedRecordError(f"record declares {end - pos} bytes more than its fields use")
    return Record(attributes, timestamp_delta, offset_delta, key, value, headers), pos


def _write_varint(out: bytearray, value: int) -> None:
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(1)  # zigzag -1
    else:
        _write_varint(out, len(value))
        out += value


def encode_record(record: Record, offset_delta: int | None = None) -> bytes:
    """One record's bytes, length prefix included."""
    body = bytearray()
    body.append(record.attributes & 0xFF)
    _write_varint(body, record.timestamp_delta)
    _write_varint(body, record.offset_delta if offset_delta is None else offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for name, value in record.headers:
        _write_bytes(body, name.encode())
        _write_bytes(body, value)
    out = bytearray()
    _write_varint(out, len(body))
    out += body
    return bytes(out)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    timestamp_type: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """A v2 batch holding ``records``, CRC-32C computed.

    Offset deltas must rise strictly; records that all leave ``offset_delta`` at 0 are numbered
    0, 1, 2... ``base_timestamp`` None means no timestamp (-1). ``max_timestamp`` defaults to the
    latest record timestamp; ``last_offset_delta`` to the last record's (the log cleaner keeps the
    original when it empties a batch).
    """
    deltas = [r.offset_delta for r in records]
    if len(records) > 1 and not any(deltas):
        deltas = list(range(len(records)))
    elif any(b <= a for a, b in itertools.pairwise(deltas)) or (deltas and deltas[0] < 0):
        raise ValueError(f"record offset deltas must rise strictly from 0 or more: {deltas}")
    if not 0 <= compression <= 4:
        raise ValueError(f"unknown compression codec {compression}")
    base_ts = NO_TIMESTAMP if base_timestamp is None else base_timestamp
    if max_timestamp is None:
        max_timestamp = base_ts + max((r.timestamp_delta for r in records), default=0)
    if last_offset_delta is None:
        last_offset_delta = deltas[-1] if deltas else 0
    body = b"".join(encode_record(r, d) for r, d in zip(records, deltas, strict=True))
    if compression:
        body = _compression.compress(compression, body)
    attributes = (
        compression
        | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
        | (TRANSACTIONAL_MASK if transactional else 0)
        | (CONTROL_MASK if control else 0)
    )
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_ts,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += body
    _CRC.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


# -- control records -------------------------------------------------------------------------------


class ControlRecordType(IntEnum):
    """The ``type`` in a control record's key (Kafka's ControlRecordType)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinator_epoch
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A commit or abort marker, the one record of a transactional control batch."""

    commit: bool
    coordinator_epoch: int
    version: int = END_TXN_MARKER_VERSION


def control_record_key(type_id: int) -> bytes:
    """The key of a control record of type ``type_id`` (a marker, or a KRaft control message)."""
    return _CONTROL_KEY.pack(CONTROL_KEY_VERSION, type_id)


def control_record_type(record: Record) -> int:
    """The type id in a control record's key; unknown ids are returned as they are."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError("control record key shorter than 4 bytes")
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    return int(type_id)


def parse_end_txn_marker(record: Record) -> EndTxnMarker:
    """The marker a control record holds; later versions are read as version 0, as Kafka does."""
    type_id = control_record_type(record)
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise InvalidRecordError(f"control record type {type_id} is not a transaction marker")
    value = record.value
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise InvalidRecordError("end transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"invalid end transaction marker version {version}")
    return EndTxnMarker(type_id == ControlRecordType.COMMIT, coordinator_epoch, version)


def build_end_txn_marker(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch that ends a transaction, laid out as Kafka's broker writes it."""
    type_id = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    record = Record(
        key=control_record_key(type_id),
        value=_END_TXN_VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=timestamp,
    )


# -- legacy message sets (magic 0 and 1) -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    """A message of a magic 0 or 1 message set, with any compressed wrapper already unpacked.

    ``offset`` is absolute; ``timestamp`` is the effective one (-1 in magic 0; the wrapper's under
    LogAppendTime), and ``attributes`` carry the wrapper's timestamp type.
    """

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic > 0 and bool(self.attributes & TIMESTAMP_TYPE_MASK)


def decode_legacy_message_set(
    buf: Buffer, *, partial_ok: bool = False, max_uncompressed: int = _compression.DEFAULT_MAX_OUTPUT
) -> list[LegacyMessage]:
    """The messages of a magic 0/1 message set, CRC-32s checked and compressed wrappers expanded.

    Inner offsets of magic 1 wrappers are relative and made absolute here, as Kafka does. Inner
    messages that are compressed again or carry another magic raise ``InvalidRecordError``.
    """
    messages: list[LegacyMessage] = []
    for wrapper in _legacy_entries(buf, partial_ok=partial_ok):
        if not wrapper.compression:
            messages.append(wrapper)
            continue
        if wrapper.value is None:
            raise InvalidRecordError("compressed message with a null value")
        if wrapper.compression not in (_compression.GZIP, _compression.SNAPPY, _compression.LZ4):
            raise InvalidRecordError(f"compression codec {wrapper.compression} is not valid in magic {wrapper.magic}")
        inner_set = _compression.decompress(
            wrapper.compression,
            wrapper.value,
            max_output=max_uncompressed,
            broken_lz4_checksum=wrapper.magic == 0,
        )
        inner = list(_legacy_entries(inner_set, partial_ok=False))
        if not inner:
            raise InvalidRecordError("compressed message with no inner messages")
        # Magic 1 inner offsets count from the wrapper's, which is the last one's; a wrapper offset of
        # 0 (some producers) means the inner offsets stand as they are.
        shift = wrapper.offset - inner[-1].offset if wrapper.magic > 0 and wrapper.offset != 0 else 0
        if shift < 0:
            raise InvalidRecordError(f"compressed message offset {wrapper.offset} is below its inner offsets")
        for msg in inner:
            if msg.magic != wrapper.magic:
                raise InvalidRecordError(f"inner message magic {msg.magic} differs from wrapper magic {wrapper.magic}")
            if msg.compression:
                raise InvalidRecordError("inner messages must not be compressed")
            timestamp = wrapper.timestamp if wrapper.log_append_time else msg.timestamp
            attributes = msg.attributes & ~TIMESTAMP_TYPE_MASK | wrapper.attributes & TIMESTAMP_TYPE_MASK
            messages.append(LegacyMessage(msg.offset + shift, msg.magic, attributes, timestamp, msg.key, msg.value))
    return messages


def _legacy_entries(buf: Buffer, *, partial_ok: bool) -> Iterator[LegacyMessage]:
    """The shallow entries of a message set, each CRC-checked."""
    data = bytes(buf)
    for pos, header in iter_batches(data, allow_legacy=True, partial_ok=partial_ok):
        if header.magic == CURRENT_MAGIC:
            raise InvalidRecordError("a v2 record batch inside a legacy message set")
        if not legacy_crc_ok(data, pos, header):
            raise CorruptRecordError(f"message at offset {header.base_offset} is corrupt (CRC mismatch)")
        end = pos + header.size
        p = pos + LOG_OVERHEAD + (_LEGACY_V0_OVERHEAD if header.magic == 0 else _LEGACY_V1_OVERHEAD) - 8
        key, p = _legacy_bytes(data, p, end)
        value, p = _legacy_bytes(data, p, end)
        if p != end:
            raise CorruptRecordError(f"message at offset {header.base_offset} has {end - p} stray bytes")
        yield LegacyMessage(header.base_offset, header.magic, header.attributes, header.base_timestamp, key, value)


def _legacy_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError("message truncated inside a length field")
    (length,) = _INT32.unpack_from(data, pos)
    pos += 4
    if length == -1:
        return None, pos
    if length < -1 or length > end - pos:
        raise CorruptRecordError(f"message field length {length} runs past the message")
    return data[pos : pos + length], pos + length


def convert_legacy_to_v2(
    buf: Buffer, *, compression: int | None = None, max_uncompressed: int = _compression.DEFAULT_MAX_OUTPUT
) -> bytes:
    """One v2 batch holding the messages of a magic 0/1 message set, as Kafka up-converts them.

    Offsets are kept when they rise strictly within an int32 of the first, otherwise renumbered from it. ``compression``
    defaults to the codec the message set used. Magic 0 messages have no timestamp (-1).
    """
    messages = decode_legacy_message_set(buf, max_uncompressed=max_uncompressed)
    if not messages:
        raise InvalidRecordError("message set holds no messages")
    if compression is None:
        wrapper = next((h for _, h in iter_batches(buf, allow_legacy=True) if h.compression), None)
        compression = wrapper.compression if wrapper is not None else 0
    offsets = [m.offset for m in messages]
    base_offset = offsets[0]
    # An offset delta is an int32: offsets further apart than that are renumbered too.
    if all(b > a for a, b in itertools.pairwise(offsets)) and offsets[-1] - base_offset <= _INT32_MAX:
        deltas = [o - base_offset for o in offsets]
    else:
        deltas = list(range(len(messages)))
    base_timestamp = messages[0].timestamp
    records = [
        Record(0, m.timestamp - base_timestamp, d, m.key, m.value, []) for m, d in zip(messages, deltas, strict=True)
    ]
    return build_batch(
        records,
        base_offset=base_offset,
        compression=compression,
        timestamp_type=1 if messages[0].log_append_time else 0,
        base_timestamp=base_timestamp,
        max_timestamp=max(m.timestamp for m in messages),
    )
