"""Coordinator records in an internal topic: what ``__consumer_offsets`` and ``__transaction_state``
share.

Both coordinators keep their durable state as (key, value) records in Kafka's layout: key and
value each an int16 version followed by the fields of a ``data`` spec, a null value a tombstone.
A key lives in partition ``abs(hash(key)) % partitions`` of its topic, with Java's
String.hashCode, so the layout matches Kafka's for the same partition count.

A coordinator sees one narrow interface, ``CoordinatorStore.append(partition, records, now_ms)``,
which returns once the records are durable (flushed: acks=all on a single node) or raises
``StoreError``. ``CoordinatorLogStore`` writes them as one uncompressed v2 batch per call into a
``PartitionLog``; ``read_records`` reads a partition back for the replay at start-up. What each
record means stays with its coordinator (``group.records``, ``txn.records``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

from kafkalike.log.errors import KafkaStorageError, LogError, RecordBatchTooLarge
from kafkalike.log.partition_log import PartitionLog
from kafkalike.log.producer_state import AppendOrigin
from kafkalike.protocol.codec import Message, schema
from kafkalike.protocol.errors import DecodeError, ProtocolError, UnsupportedVersionError
from kafkalike.protocol.records import Record, RecordBatchHeader, build_batch, decode_records, iter_batches

log = logging.getLogger("kafkalike.log.coordinator_log")
READ_CHUNK_BYTES = 1 << 20
_VERSION = struct.Struct(">h")

CoordinatorRecord = tuple[bytes, bytes | None]


class StoreError(Exception):
    """Records that could not be made durable; ``too_large`` when the batch was refused for size,
    ``storage`` when the disk refused them (Kafka's coordinators answer NOT_COORDINATOR then;
    the log layer has already logged it)."""

    def __init__(self, message: str, *, too_large: bool = False, storage: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large
        self.storage = storage


class RecordError(ValueError):
    """A key or value in a coordinator topic that cannot be read."""


class CoordinatorStore(Protocol):
    def append(self, partition: int, records: Sequence[CoordinatorRecord], now_ms: int) -> None: ...


class CoordinatorLogStore:
    """Appends to partition logs that ``log_for(partition)`` returns with their leader epoch.

    ``on_append(partition)`` runs after each durable append (the server moves the high
    watermark and wakes fetchers there).
    """

    def __init__(
        self,
        log_for: Callable[[int], tuple[PartitionLog, int]],
        on_append: Callable[[int], None] | None = None,
    ) -> None:
        self._log_for = log_for
        self._on_append = on_append

    def append(self, partition: int, records: Sequence[CoordinatorRecord], now_ms: int) -> None:
        if not records:
            return
        batch = build_batch([Record(key=k, value=v) for k, v in records], base_timestamp=now_ms)
        try:
            plog, epoch = self._log_for(partition)
            # Durable before the coordinator answers; what fails is taken out of the log again.
            plog.append_durably(bytearray(batch), leader_epoch=epoch, now_ms=now_ms, origin=AppendOrigin.COORDINATOR)
        except RecordBatchTooLarge as exc:
            raise StoreError(str(exc), too_large=True) from exc
        except (KafkaStorageError, OSError) as exc:
            raise StoreError(f"cannot append to partition {partition}: {exc}", storage=True) from exc
        except LogError as exc:
            raise StoreError(f"cannot append to partition {partition}: {exc}") from exc
        if self._on_append is not None:
            self._on_append(partition)


def log_batches(plog: PartitionLog) -> Iterator[tuple[bytes, int, RecordBatchHeader]]:
    """(buffer, position, header) of every batch of a partition, in log order."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        blob = plog.read_bytes(offset, READ_CHUNK_BYTES, min_one_batch=True)
        if not blob:
            return
        start = offset
        for pos, header in iter_batches(blob):
            offset = header.last_offset + 1
            yield blob, pos, header
        if offset <= start:  # nothing readable at ``offset``: stop rather than loop
            return


def read_records(plog: PartitionLog, *, skip_transactional: bool) -> Iterator[tuple[int, CoordinatorRecord]]:
    """Every (offset, (key, value)) of a partition with a key, in log order. Control batches are
    skipped, and transactional ones too with ``skip_transactional`` (a coordinator that learns
    their fate from the markers replays them itself); an unreadable batch is logged and skipped."""
    for blob, pos, header in log_batches(plog):
        if header.is_control or (skip_transactional and header.is_transactional):
            continue
        try:
            records = decode_records(blob, pos, header)
        except ProtocolError as exc:
            log.warning("skipping an unreadable batch at offset %d: %s", header.base_offset, exc)
            continue
        for record in records:
            if record.key is not None:
                yield record.offset(header), (record.key, record.value)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: 31*h + c over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (abs of MIN_VALUE is 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def encode_versioned(spec: str, version: int, body: Mapping[str, object]) -> bytes:
    """A key or value: the int16 version, then ``body`` as message ``spec`` at that version."""
    return _VERSION.pack(version) + schema(spec, "message", version).encode(body)


def key_version(key: bytes | None) -> int:
    """The version a record key starts with, which says what the record is."""
    if key is None or len(key) < 2:
        raise RecordError("record without a versioned key")
    (version,) = _VERSION.unpack_from(key)
    return int(version)


def decode_versioned(spec: str, data: bytes) -> tuple[int, Message]:
    """The version and fields of a key or value written by ``encode_versioned``."""
    if len(data) < 2:
        raise RecordError(f"{spec}: {len(data)} bytes, no version")
    (version,) = _VERSION.unpack_from(data)
    try:
        return version, schema(spec, "message", version).decode(data[2:])
    except (DecodeError, UnsupportedVersionError) as exc:
        raise RecordError(f"{spec} v{version}: {exc}") from exc
