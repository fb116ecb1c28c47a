"""Idempotent and transactional producer state for one partition (Kafka's ProducerStateManager).

For each producer id the state is its epoch, the last five appended batches (sequence and offset
ranges, to recognise a retried batch), the coordinator epoch of its last transaction marker, and
the first offset of its open transaction. The rules follow Kafka's ProducerAppendInfo: an older
epoch is fenced, a new epoch must restart at sequence 0, otherwise sequences must follow on (with
wrap-around after Int.MAX), and a producer the log knows nothing about may start anywhere (its
records may have been deleted by retention; ``strict_unknown_producer`` restores the pre-2.5
UNKNOWN_PRODUCER_ID answer instead).

State is rebuilt from batch headers (plus the one record of each control batch) and checkpointed in
``%020d.snapshot`` files named by the offset the state is valid up to, in Kafka's snapshot format::

    int16  version (1)
    uint32 CRC-32C of everything after this field
    int32  number of entries, then per producer:
        int64 producer_id, int16 epoch, int32 last_sequence, int64 last_offset, int32 offset_delta,
        int64 timestamp, int32 coordinator_epoch, int64 current_txn_first_offset (-1: none)

Only the last batch of each producer survives a snapshot (as in Kafka), so after a restart
duplicates are recognised for the most recent batch only.
"""

from __future__ import annotations

import enum
import struct
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c

from kafkalike.log.errors import (
    InvalidProducerEpoch,
    InvalidTxnState,
    OutOfOrderSequence,
    ProducerStateError,
    TransactionCoordinatorFenced,
    UnknownProducerId,
)
from kafkalike.protocol.errors import ProtocolError
from kafkalike.protocol.records import RecordBatchHeader, decode_records, parse_end_txn_marker

BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT_MAX = 0x7FFFFFFF
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1

_SNAPSHOT_HEAD = struct.Struct(">hI")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_COUNT = struct.Struct(">i")

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


class AppendOrigin(enum.Enum):
    """Who is appending: clients get full sequence checks, coordinators only epoch checks."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class Verdict(enum.Enum):
    OK = "OK"
    DUPLICATE = "DUPLICATE"
    OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
    UNKNOWN_PRODUCER_ID = "UNKNOWN_PRODUCER_ID"
    INVALID_TXN_STATE = "INVALID_TXN_STATE"
    TRANSACTION_COORDINATOR_FENCED = "TRANSACTION_COORDINATOR_FENCED"


_ERRORS: dict[Verdict, type[ProducerStateError]] = {
    Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER: OutOfOrderSequence,
    Verdict.INVALID_PRODUCER_EPOCH: InvalidProducerEpoch,
    Verdict.UNKNOWN_PRODUCER_ID: UnknownProducerId,
    Verdict.INVALID_TXN_STATE: InvalidTxnState,
    Verdict.TRANSACTION_COORDINATOR_FENCED: TransactionCoordinatorFenced,
}


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ControlMarker(NamedTuple):
    """A transaction marker: ``control_type`` 0 = ABORT, 1 = COMMIT."""

    control_type: int
    coordinator_epoch: int


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class CheckResult(NamedTuple):
    verdict: Verdict
    message: str = ""
    duplicate: BatchMetadata | None = None

    def raise_for_error(self) -> None:
        error = _ERRORS.get(self.verdict)
        if error is not None:
            raise error(self.message)


_OK = CheckResult(Verdict.OK)


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.epoch,
            deque(self.batches, maxlen=BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp,
        )

    def find_duplicate(self, header: RecordBatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def update_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


@dataclass
class PendingAppend:
    """Validated producer-state changes of one append, applied only once the bytes are written."""

    entries: dict[int, ProducerEntry] = field(default_factory=dict)
    completed: list[CompletedTxn] = field(default_factory=list)
    duplicate: BatchMetadata | None = None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT_MAX)


def parse_control_marker(
    buf: bytes | bytearray | memoryview, pos: int, header: RecordBatchHeader
) -> ControlMarker | None:
    """The end-transaction marker a control batch holds; None for an emptied batch or another kind
    of control record (control batches are tiny and never compressed, so this is cheap)."""
    try:
        records = decode_records(buf, pos, header)
        if not records:
            return None
        marker = parse_end_txn_marker(records[0])
    except ProtocolError:
        return None
    return ControlMarker(CONTROL_COMMIT if marker.commit else CONTROL_ABORT, marker.coordinator_epoch)


class ProducerStateManager:
    """Producer entries keyed by id, least recently appended first (for bounded eviction)."""

    def __init__(self, *, max_producer_ids: int = 100_000, strict_unknown_producer: bool = False) -> None:
        self.producers: OrderedDict[int, ProducerEntry] = OrderedDict()
        self.max_producer_ids = max_producer_ids
        self.strict_unknown_producer = strict_unknown_producer

    # ---- validation ------------------------------------------------------------------------

    def check(self, header: RecordBatchHeader, origin: AppendOrigin = AppendOrigin.CLIENT) -> CheckResult:
        """What appending this (offset-assigned) data batch would meet, without changing state."""
        if header.producer_id < 0:
            return _OK
        current = self.producers.get(header.producer_id)
        if origin is AppendOrigin.CLIENT and current is not None:
            duplicate = current.find_duplicate(header)
            if duplicate is not None:
                return CheckResult(Verdict.DUPLICATE, "duplicate batch", duplicate)
        entry = current.copy() if current is not None else ProducerEntry(header.producer_id)
        return self._check_data(entry, current, header, origin)

    def _check_data(
        self, entry: ProducerEntry, current: ProducerEntry | None, header: RecordBatchHeader, origin: AppendOrigin
    ) -> CheckResult:
        pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
        if epoch < entry.epoch and origin is not AppendOrigin.REPLICATION:
            return CheckResult(
                Verdict.INVALID_PRODUCER_EPOCH, f"producer {pid} epoch {epoch} is older than {entry.epoch}"
            )
        if origin is AppendOrigin.CLIENT:
            if epoch != entry.epoch:
                if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                    return CheckResult(
                        Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {pid} new epoch {epoch} must start at sequence 0, not {first_seq}",
                    )
                if first_seq != 0 and current is None and self.strict_unknown_producer:
                    return CheckResult(Verdict.UNKNOWN_PRODUCER_ID, f"no state for producer {pid}")
            elif (
                current is not None
                and current.epoch != NO_PRODUCER_EPOCH
                and not _in_sequence(entry.last_seq, first_seq)
            ):
                return CheckResult(
                    Verdict.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid} sequence {first_seq} does not follow {entry.last_seq}",
                )
        if entry.current_txn_first_offset is not None and not header.is_transactional and not header.is_control:
            return CheckResult(Verdict.INVALID_TXN_STATE, f"producer {pid} wrote outside its open transaction")
        return _OK

    def prepare(
        self, batches: list[tuple[RecordBatchHeader, ControlMarker | None]], origin: AppendOrigin
    ) -> PendingAppend:
        """Validate an append's batches in order (each against the state the previous ones leave).

        Raises the ProducerStateError for the first refusal; a duplicate stops the walk and is
        reported in the result so the caller answers with the original offsets.
        """
        pending = PendingAppend()
        for header, marker in batches:
            pid = header.producer_id
            if pid < 0:
                continue
            current = self.producers.get(pid)
            control = header.is_control
            if origin is AppendOrigin.CLIENT and current is not None and not control:
                duplicate = current.find_duplicate(header)
                if duplicate is not None:
                    pending.duplicate = duplicate
                    return pending
            entry = pending.entries.get(pid) or (current.copy() if current is not None else ProducerEntry(pid))
            if control:
                checked = self._check_marker(entry, header, marker, origin)
            else:
                checked = self._check_data(entry, current, header, origin)
            if checked is not _OK:
                checked.raise_for_error()
            completed = _apply(entry, header, marker)
            if completed is not None:
                pending.completed.append(completed)
            pending.entries[pid] = entry
        return pending

    def _check_marker(
        self, entry: ProducerEntry, header: RecordBatchHeader, marker: ControlMarker | None, origin: AppendOrigin
    ) -> CheckResult:
        if origin is AppendOrigin.REPLICATION or marker is None:
            return _OK
        if header.producer_epoch < entry.epoch:
            return CheckResult(Verdict.INVALID_PRODUCER_EPOCH, "transaction marker from an older producer epoch")
        if marker.coordinator_epoch < entry.coordinator_epoch:
            return CheckResult(Verdict.TRANSACTION_COORDINATOR_FENCED, "transaction marker from a zombie coordinator")
        return _OK

    # ---- state changes -------------------------------------------------------------------------

    def commit(self, pending: PendingAppend) -> None:
        for pid, entry in pending.entries.items():
            self.producers[pid] = entry
            self.producers.move_to_end(pid)
        self._evict_over_limit()

    def replay(self, header: RecordBatchHeader, marker: ControlMarker | None) -> CompletedTxn | None:
        """Apply a batch already in the log, without validation (recovery, snapshots catch-up)."""
        if header.producer_id < 0:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
        else:
            self.producers.move_to_end(header.producer_id)
        completed = _apply(entry, header, marker)
        self._evict_over_limit()
        return completed

    def _evict_over_limit(self) -> None:
        """Forget the least recently active producers beyond the cap, sparing open transactions."""
        excess = len(self.producers) - self.max_producer_ids
        if excess <= 0:
            return
        for pid in [pid for pid, e in self.producers.items() if e.current_txn_first_offset is None][:excess]:
            del self.producers[pid]

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's producer.id.expiration.ms: drop idle producers without an open transaction."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def clear(self) -> None:
        self.producers.clear()

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (the last stable offset's bound)."""
        firsts = [e.current_txn_first_offset for e in self.producers.values() if e.current_txn_first_offset is not None]
        return min(firsts) if firsts else None

    def ongoing_transactions(self) -> dict[int, int]:
        return {
            pid: e.current_txn_first_offset
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is not None
        }

    # ---- snapshots ---------------------------------------------------------------------------

    def snapshot_bytes(self) -> bytes:
        body = bytearray(_COUNT.pack(len(self.producers)))
        for e in self.producers.values():
            last = e.batches[-1] if e.batches else None
            body += _SNAPSHOT_ENTRY.pack(
                e.producer_id,
                e.epoch,
                last.last_seq if last else NO_SEQUENCE,
                last.last_offset if last else -1,
                (last.last_offset - last.first_offset) if last else 0,
                e.last_timestamp,
                e.coordinator_epoch,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
            )
        return _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)

    def load_snapshot(self, data: bytes, now_ms: int, expiration_ms: int) -> bool:
        """Replace the state with a snapshot's; False (state untouched) when it is unreadable."""
        if len(data) < _SNAPSHOT_HEAD.size + _COUNT.size:
            return False
        version, crc = _SNAPSHOT_HEAD.unpack_from(data, 0)
        body = data[_SNAPSHOT_HEAD.size :]
        if version != SNAPSHOT_VERSION or crc32c.crc32c(body) != crc:
            return False
        (count,) = _COUNT.unpack_from(body, 0)
        if count < 0 or len(body) != _COUNT.size + count * _SNAPSHOT_ENTRY.size:
            return False
        producers: OrderedDict[int, ProducerEntry] = OrderedDict()
        for values in _SNAPSHOT_ENTRY.iter_unpack(body[_COUNT.size :]):
            pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = values
            entry = ProducerEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp=ts)
            entry.current_txn_first_offset = None if txn_first < 0 else txn_first
            if last_offset >= 0:
                first_seq = (last_seq - delta) % (INT_MAX + 1) if last_seq >= 0 else NO_SEQUENCE
                entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset - delta, last_offset, ts))
            if entry.current_txn_first_offset is not None or now_ms - ts < expiration_ms:
                producers[pid] = entry
        self.producers = producers
        return True


def _apply(entry: ProducerEntry, header: RecordBatchHeader, marker: ControlMarker | None) -> CompletedTxn | None:
    """Kafka's ProducerAppendInfo.append for one batch whose offsets are assigned."""
    if header.is_control:
        entry.update_epoch(header.producer_epoch)
        entry.last_timestamp = header.max_timestamp
        if marker is None:
            return None
        entry.coordinator_epoch = marker.coordinator_epoch
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = None
        if first is None:
            return None
        return CompletedTxn(entry.producer_id, first, header.base_offset, marker.control_type == CONTROL_ABORT)
    entry.update_epoch(header.producer_epoch)
    entry.batches.append(
        BatchMetadata(
            header.base_sequence, header.last_sequence, header.base_offset, header.last_offset, header.max_timestamp
        )
    )
    entry.last_timestamp = header.max_timestamp
    if header.is_transactional and entry.current_txn_first_offset is None:
        entry.current_txn_first_offset = header.base_offset
    return None
