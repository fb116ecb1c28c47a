"""What log compaction keeps of each batch: Kafka's ``Cleaner.cleanInto`` filter and ``MemoryRecords.filterTo``.

Pure functions over batch bytes; ``cleaner.py`` feeds them batches in log order and writes what they
return. The rules, as Kafka applies them:

- a data record survives when it holds the newest offset the ``OffsetMap`` has for its key, or lies
  beyond what the map covers; keyless records never survive (produce validation refuses them on a
  compacted topic, so only a topic made compacted later holds any; ``CleanerStats.invalid_messages``
  counts them);
- a tombstone (null value) survives until its batch's delete horizon: the first clean that keeps it
  rewrites the batch with ``base_timestamp`` = now + delete.retention.ms and the DELETE_HORIZON
  attribute bit (KIP-534); a later clean after that time drops it;
- records of aborted transactions go; an abort or commit marker stays while any batch of its
  transaction remains in the log, then gets a delete horizon the same way, then goes;
- the batch holding an active producer's last sequence (or its last marker) stays, emptied if need
  be, so producer state rebuilt from the log still knows the producer (Kafka's RETAIN_EMPTY);
- so does the last batch of each cleaned segment, so the segment keeps its next offset (Kafka keeps
  the last batch of the cleaning round; see ``clean_batch``);
- a batch that loses nothing is copied byte for byte; one that loses records is re-encoded with the
  same base offset, last offset, producer id, epoch, base sequence, flags and codec.

Kafka finds aborted transactions in its ``.txnindex`` files; this log has none, so ``TxnResolver``
reads ahead to each producer's next marker instead (only for transactional batches, so logs without
transactions pay nothing).
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import crc32c

from kafkalike.log.offset_map import OffsetMap
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.records import (
    CRC_OFFSET,
    CRC_START,
    DELETE_HORIZON_MASK,
    Buffer,
    ControlRecordType,
    Record,
    RecordBatchHeader,
    build_batch,
    control_record_type,
    decode_records,
)

_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
# Markers of other producers the resolver has read ahead past; beyond this many, stale ones are pruned.
_RESOLVER_PRUNE_AT = 10_000


class ControlKind(enum.Enum):
    ABORT = "abort"
    COMMIT = "commit"
    OTHER = "other"  # another control record type (or one that does not parse): always kept
    EMPTY = "empty"  # emptied by an earlier clean: may always go


def control_kind(batch: Buffer, header: RecordBatchHeader) -> ControlKind:
    """What a control batch holds (control batches are one tiny uncompressed record)."""
    try:
        records = decode_records(batch, 0, header)
        if not records:
            return ControlKind.EMPTY
        type_id = control_record_type(records[0])
    except ProtocolError:
        return ControlKind.OTHER
    if type_id == ControlRecordType.ABORT:
        return ControlKind.ABORT
    if type_id == ControlRecordType.COMMIT:
        return ControlKind.COMMIT
    return ControlKind.OTHER


def delete_horizon_ms(header: RecordBatchHeader) -> int | None:
    """The batch's delete horizon (its base timestamp) when the DELETE_HORIZON bit is set."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None


@dataclass
class CleanerStats:
    """What one cleaning of one log did (Kafka's CleanerStats)."""

    log: str = ""
    first_dirty_offset: int = 0
    end_offset: int = 0  # the new first dirty offset: everything below it is now clean
    map_messages_read: int = 0
    map_bytes_read: int = 0
    map_entries: int = 0
    map_full: bool = False
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_retained: int = 0
    batches_rewritten: int = 0
    invalid_messages: int = 0  # keyless records found (and dropped) in a compacted log
    segments_cleaned: int = 0  # source segments replaced by cleaned ones
    groups_swapped: int = 0
    next_delete_horizon_ms: int | None = None  # earliest horizon of a tombstone or marker kept
    aborted: bool = False
    errors: list[str] = field(default_factory=list)


class TxnResolver:
    """Answers "was the transaction holding this batch aborted?" without a transaction index.

    A producer has one transaction open at a time and ends it with a marker, so a transactional
    batch's fate is the type of its producer's next marker. ``read_ahead(offset)`` returns the
    (header, control kind) of some batches from ``offset`` on ([] at the log end); the resolver
    walks forward with it only as far as questions need, and questions must come in offset order.
    """

    def __init__(self, read_ahead: Callable[[int], list[tuple[RecordBatchHeader, ControlKind | None]]]) -> None:
        self._read_ahead = read_ahead
        self._cursor: int | None = None
        self._markers: dict[int, deque[tuple[int, bool]]] = {}
        self._held = 0
        self.batches_read = 0

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        """The fate of ``producer_id``'s transaction holding ``offset``; False when no marker follows
        (cannot happen below the last stable offset; keeping the data is the safe answer)."""
        while True:
            queue = self._markers.get(producer_id)
            while queue and queue[0][0] < offset:
                queue.popleft()
                self._held -= 1
            if queue:
                return queue[0][1]
            if not self._advance(offset):
                return False

    def _advance(self, offset: int) -> bool:
        start = offset if self._cursor is None else max(self._cursor, offset)
        if self._held > _RESOLVER_PRUNE_AT:
            self._prune(offset)
        batches = self._read_ahead(start)
        if not batches:
            return False
        for header, kind in batches:
            if kind is ControlKind.ABORT or kind is ControlKind.COMMIT:
                self._markers.setdefault(header.producer_id, deque()).append(
                    (header.base_offset, kind is ControlKind.ABORT)
                )
                self._held += 1
        self.batches_read += len(batches)
        self._cursor = batches[-1][0].last_offset + 1
        return True

    def _prune(self, offset: int) -> None:
        """Drop markers below ``offset``: later questions are all about later offsets."""
        for producer_id in list(self._markers):
            queue = self._markers[producer_id]
            while queue and queue[0][0] < offset:
                queue.popleft()
                self._held -= 1
            if not queue:
                del self._markers[producer_id]


class CleanedTransactions:
    """Kafka's CleanedTransactionMetadata: transaction state carried through one cleaning pass,
    which starts at the log start offset so it sees every remaining batch of every transaction."""

    def __init__(self, resolver: TxnResolver) -> None:
        self._resolver = resolver
        self._committed: set[int] = set()  # producers with batches of a committed transaction seen
        self._aborted: set[int] = set()  # producers with batches of an aborted transaction seen

    def on_data(self, header: RecordBatchHeader) -> bool:
        """True when the batch belongs to an aborted transaction (and may go)."""
        if not header.is_transactional or header.producer_id < 0:
            return False
        if self._resolver.is_aborted(header.producer_id, header.base_offset):
            self._aborted.add(header.producer_id)
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control(self, header: RecordBatchHeader, kind: ControlKind) -> bool:
        """True when the marker's transaction has no batches left, so the marker may go too."""
        if kind is ControlKind.EMPTY:
            return True
        if kind is ControlKind.ABORT:
            seen = header.producer_id in self._aborted
            self._aborted.discard(header.producer_id)
            return not seen
        if kind is ControlKind.COMMIT:
            seen = header.producer_id in self._committed
            self._committed.discard(header.producer_id)
            return not seen
        return False


@dataclass
class BatchFilter:
    """Everything ``clean_batch`` needs besides the batch: fixed for one cleaning pass, except
    ``last_records``, which the cleaner refreshes per segment group as Kafka does."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    txns: CleanedTransactions
    stats: CleanerStats
    # producer id -> (offset of its last data batch's last record or None, epoch), from producer state
    last_records: dict[int, tuple[int | None, int]] = field(default_factory=dict)

    def is_last_of_producer(self, header: RecordBatchHeader) -> bool:
        last = self.last_records.get(header.producer_id)
        if last is None:
            return False
        last_data_offset, epoch = last
        if last_data_offset is not None:
            return header.last_offset == last_data_offset
        return header.is_control and header.producer_epoch == epoch

    def keeps(self, header: RecordBatchHeader, record: Record) -> bool:
        """Kafka's shouldRetainRecord for a data record."""
        offset = header.base_offset + record.offset_delta
        if offset > self.offset_map.latest_offset:
            return True
        if record.key is None:
            self.stats.invalid_messages += 1
            return False
        if offset < self.offset_map.get(record.key):
            return False
        if record.value is not None:
            return True
        horizon = delete_horizon_ms(header)
        return horizon is None or self.now_ms < horizon


def clean_batch(batch: memoryview, header: RecordBatchHeader, f: BatchFilter, *, last: bool) -> Buffer | None:
    """What to write for one batch: ``batch`` itself, new bytes, or None to drop it.

    ``last`` marks the last batch of the segment group, kept (emptied if need be) so the cleaned
    segment ends where its sources did: a leftover ``.swap`` then covers exactly the segments it
    replaces, and the segment's next offset does not move.
    """
    if header.is_control:
        can_discard = f.txns.on_control(header, control_kind(batch, header))
        horizon = delete_horizon_ms(header)
        discard_records = can_discard and horizon is not None and horizon <= f.now_ms
    else:
        can_discard = discard_records = f.txns.on_data(header)
    retain_empty = (header.producer_id >= 0 and f.is_last_of_producer(header)) or last
    if discard_records and not retain_empty:
        f.stats.messages_read += header.records_count
        return None
    records = decode_records(batch, 0, header)
    f.stats.messages_read += len(records)
    if discard_records:
        kept: list[Record] = []
    elif header.is_control:
        kept = records
    else:
        kept = [r for r in records if f.keeps(header, r)]
    f.stats.messages_retained += len(kept)
    tombstones = any(r.value is None for r in kept) and not header.is_control
    # A horizon only matters to a batch with records left (an emptied marker may simply go).
    expiring = bool(kept) and (tombstones or (can_discard and header.is_control))
    needs_horizon = expiring and delete_horizon_ms(header) is None
    horizon = f.now_ms + f.delete_retention_ms if needs_horizon else delete_horizon_ms(header)
    if expiring and horizon is not None and horizon > f.now_ms:
        pending = f.stats.next_delete_horizon_ms
        f.stats.next_delete_horizon_ms = horizon if pending is None else min(pending, horizon)
    if len(kept) == len(records) and not needs_horizon:
        return batch
    f.stats.batches_rewritten += 1
    if kept:
        return rebuild_batch(header, kept, horizon)
    if retain_empty:
        return empty_batch(header)
    return None


def rebuild_batch(header: RecordBatchHeader, records: list[Record], horizon: int | None) -> bytes:
    """``records`` re-encoded under the batch's own header fields (Kafka's buildRetainedRecordsInto).

    With a delete horizon the base timestamp becomes the horizon and record timestamp deltas are
    taken from it, so every record keeps its timestamp. The last offset delta is the original one
    so the batch still ends on the producer's last sequence.
    """
    base_ts = header.base_timestamp if horizon is None else horizon
    rebased = [
        Record(
            r.attributes, header.base_timestamp + r.timestamp_delta - base_ts, r.offset_delta, r.key, r.value, r.headers
        )
        for r in records
    ]
    if header.log_append_time:
        max_ts = header.max_timestamp
    else:
        max_ts = max(header.base_timestamp + r.timestamp_delta for r in records)
    out = _batch_like(header, rebased, compression=header.compression, base_timestamp=base_ts, max_timestamp=max_ts)
    return out if horizon is None else _with_delete_horizon(out)


def empty_batch(header: RecordBatchHeader) -> bytes:
    """A batch with the header's offsets and producer fields and no records (Kafka's writeEmptyHeader)."""
    return _batch_like(
        header, [], compression=0, base_timestamp=header.max_timestamp, max_timestamp=header.max_timestamp
    )


def _batch_like(
    header: RecordBatchHeader, records: list[Record], *, compression: int, base_timestamp: int, max_timestamp: int
) -> bytes:
    """``records`` in a batch with ``header``'s offsets, producer fields, flags and leader epoch."""
    return build_batch(
        records,
        base_offset=header.base_offset,
        compression=compression,
        timestamp_type=1 if header.log_append_time else 0,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        last_offset_delta=header.last_offset_delta,
    )


def _with_delete_horizon(batch: bytes) -> bytes:
    out = bytearray(batch)
    (attributes,) = _ATTRIBUTES.unpack_from(out, CRC_START)
    _ATTRIBUTES.pack_into(out, CRC_START, attributes | DELETE_HORIZON_MASK)
    _CRC.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
