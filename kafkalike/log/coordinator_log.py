"""Coordinator records in an internal topic: what ``__consumer_offsets`` and ``__transaction_state``
share.

Both coordinators keep their durable state as (key, value) records in Kafka's layout: key and
value each an int16 version followed by the fields of a ``data`` spec, a null value a tombstone.
A key lives in partition ``abs(hash(key)) % partitions`` of its topic, with Java's
String.hashCode, so the layout matches Kafka's for the same partition count.

A coordinator sees one narrow interface, ``CoordinatorStore.append(partition, records, now_ms)``,
which returns once the records are durable (flushed: acks=all on a single node) or raises
``StoreError``; or, given a ``SyncTracker``, once they are in the log, their fsync left to the
tracker's owner (off the event loop), who answers only once it succeeded and, when it failed,
has the log cut back to its last durable offset and the coordinator's state reloaded from it
(Kafka unloads and reloads a coordinator partition whose log write failed). ``CoordinatorLogStore`` writes them as one uncompressed v2 batch per call into a
``PartitionLog``; ``read_records`` reads a partition back for the replay at start-up. What each
record means stays with its coordinator (``group.records``, ``txn.records``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from kafkalike.log.errors import KafkaStorageError, LogError, RecordBatchTooLarge
from kafkalike.log.partition_log import FlushTicket, PartitionLog
from kafkalike.log.producer_state import AppendOrigin
from kafkalike.log.storage import DeferredSyncs
from kafkalike.log.storage_errors import describe, reporter
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


class Appended(NamedTuple):
    """An append a caller waits for: durable once its partition's durable end passes ``end``,
    lost if the partition's sync failed (its ``cuts`` count moved on) before that."""

    partition: int
    end: int  # the log end right after it
    cuts: int  # the partition's cut count when it was made


@dataclass
class PartitionSyncState:
    """One coordinator partition's appends not yet known durable."""

    log: PartitionLog
    durable_end: int  # every offset below it is on disk (or was there when the broker started)
    cuts: int = 0  # failed syncs, each of which cut the log back to ``durable_end``
    syncs: list[DeferredSyncs] = field(default_factory=list)  # fsyncs appends left (flush.messages)
    # The durable end each cut went back to, from the first after ``cuts_before``: an append
    # made before a cut survived it if it ended there or below.
    cut_ends: list[int] = field(default_factory=list)
    cuts_before: int = 0  # the count the cut_ends start from (a log replacing another starts afresh)

    @property
    def behind(self) -> bool:
        return self.durable_end < self.log.log_end_offset or bool(self.syncs)


class SyncTracker:
    """The appends of a coordinator's partitions whose fsync is still to run, for one driver
    (the server's, on a worker thread) to run them in order: ``prepare`` on the event loop, the
    syncs anywhere, ``complete`` on the event loop again. An append counts (``is_durable``) only
    once a sync that covered it succeeded; a failed sync cuts the log back to the durable end,
    taking every append after it, and ``on_cut(partition)`` has the coordinator reload. Storage
    without a disk gives nothing to sync, so its appends are durable at once.

    ``on_durable(partition)`` runs as appends become durable (the server moves the high
    watermark there); ``on_behind(partition)`` when a partition gets something to sync.
    """

    def __init__(
        self,
        on_cut: Callable[[int], None],
        on_durable: Callable[[int], None] | None = None,
        on_behind: Callable[[int], None] | None = None,
    ) -> None:
        self.partitions: dict[int, PartitionSyncState] = {}
        self._on_cut = on_cut
        self._on_durable = on_durable
        self._on_behind = on_behind

    def appended(self, partition: int, plog: PartitionLog, first_offset: int, syncs: DeferredSyncs) -> Appended:
        """An append was made to ``plog`` at ``first_offset`` (its fsyncs, if any, in ``syncs``)."""
        state = self.partitions.get(partition)
        if state is None or state.log is not plog:  # first seen: what it held before is durable
            # A log replacing another (a partition made again) fails what waited on the old one.
            cuts = 0 if state is None else state.cuts + 1
            state = self.partitions[partition] = PartitionSyncState(plog, first_offset, cuts, cuts_before=cuts)
        if syncs:
            state.syncs.append(syncs)
        appended = Appended(partition, plog.log_end_offset, state.cuts)
        if state.behind and not plog.directory.sync_path() and not state.syncs:
            self._settle(partition, state, plog.log_end_offset)  # in memory: nothing to wait for
        elif self._on_behind is not None:
            self._on_behind(partition)
        return appended

    def log_end(self, partition: int) -> Appended | None:
        """The partition's log end as an append to wait for (a read that must not be ahead of
        the disk waits for it), or None when nothing of it is pending."""
        state = self.partitions.get(partition)
        if state is None or not state.behind:
            return None
        return Appended(partition, state.log.log_end_offset, state.cuts)

    def is_durable(self, appended: Appended) -> bool | None:
        """True once durable, False once cut, None while its sync is still to come."""
        state = self.partitions[appended.partition]
        if state.cuts != appended.cuts:
            first_cut = appended.cuts - state.cuts_before
            return 0 <= first_cut < len(state.cut_ends) and appended.end <= state.cut_ends[first_cut]
        return True if state.durable_end >= appended.end else None

    def behind(self) -> list[int]:
        return [p for p, state in self.partitions.items() if state.behind]

    def prepare(self, partition: int) -> tuple[DeferredSyncs, FlushTicket | OSError]:
        """The fsyncs that make the partition durable up to its log end now (run them off the
        loop, then ``complete``); an OSError in place of the ticket when preparing failed."""
        state = self.partitions[partition]
        syncs = DeferredSyncs()
        for pending in state.syncs:
            syncs.descriptors += pending.descriptors
            syncs.directories += [d for d in pending.directories if d not in syncs.directories]
            syncs.unlinks += pending.unlinks
            pending.descriptors = []
        state.syncs = []
        try:
            return syncs, state.log.prepare_flush(syncs)
        except OSError as exc:
            syncs.discard()
            return DeferredSyncs(), exc

    def complete(self, partition: int, ticket: FlushTicket | OSError, error: OSError | None, now_ms: int) -> None:
        """After the syncs of ``prepare`` ran: appends below the ticket's target durable, or, on
        an error, the log cut back to its durable end and the coordinator told to reload."""
        state = self.partitions[partition]
        plog = state.log
        if isinstance(ticket, OSError):
            error = ticket
        elif error is None:
            plog.complete_flush(ticket, now_ms)
            self._settle(partition, state, min(ticket.target, plog.log_end_offset))
            return
        assert error is not None
        durable = max(state.durable_end, min(plog.recovery_point, plog.log_end_offset))
        reporter.report("flush of", plog.directory.path, error, now_ms)  # one line a minute per kind
        log.info(
            "cutting %s back from offset %d to %d, what is durable", plog.directory.path, plog.log_end_offset, durable
        )
        state.cuts += 1
        for pending in state.syncs:  # of appends made meanwhile, which the cut takes too
            pending.discard()
        state.syncs = []
        try:
            plog.truncate_to(durable, now_ms=now_ms)
        except OSError as exc:
            log.error("storage error: cannot cut %s back to offset %d: %s", plog.directory.path, durable, describe(exc))
        state.durable_end = min(durable, plog.log_end_offset)
        state.cut_ends.append(state.durable_end)
        self._on_cut(partition)

    def abandon(self, partition: int) -> None:
        """The partition's coordinator let go of it (unloaded): every append not durable yet
        counts as lost, as if cut, though the log keeps it and its fsync still runs."""
        state = self.partitions.get(partition)
        if state is not None:
            state.cuts += 1
            state.cut_ends.append(state.durable_end)

    def _settle(self, partition: int, state: PartitionSyncState, end: int) -> None:
        if end > state.durable_end:
            state.durable_end = end
            if self._on_durable is not None:
                self._on_durable(partition)


class CoordinatorLogStore:
    """Appends to partition logs that ``log_for(partition)`` returns with their leader epoch.

    ``on_append(partition)`` runs after each durable append (the server moves the high
    watermark and wakes fetchers there). With a ``tracker`` an append returns once it is in
    the log, its fsync left to the tracker (which calls its own ``on_durable``).
    """

    def __init__(
        self,
        log_for: Callable[[int], tuple[PartitionLog, int]],
        on_append: Callable[[int], None] | None = None,
        tracker: SyncTracker | None = None,
    ) -> None:
        self._log_for = log_for
        self._on_append = on_append
        self.tracker = tracker

    def append(self, partition: int, records: Sequence[CoordinatorRecord], now_ms: int) -> None:
        if not records:
            return
        batch = build_batch([Record(key=k, value=v) for k, v in records], base_timestamp=now_ms)
        try:
            append_coordinator_batch(self._log_for, partition, batch, now_ms, self.tracker)
        except RecordBatchTooLarge as exc:
            raise StoreError(str(exc), too_large=True) from exc
        except (KafkaStorageError, OSError) as exc:
            raise StoreError(f"cannot append to partition {partition}: {exc}", storage=True) from exc
        except LogError as exc:
            raise StoreError(f"cannot append to partition {partition}: {exc}") from exc
        if self.tracker is None and self._on_append is not None:  # a tracker calls its own once durable
            self._on_append(partition)


def append_coordinator_batch(
    log_for: Callable[[int], tuple[PartitionLog, int]],
    partition: int,
    batch: bytes,
    now_ms: int,
    tracker: SyncTracker | None,
) -> None:
    """A coordinator's ``batch`` appended to the log ``log_for(partition)`` returns, at its
    leader epoch. With a ``tracker``: in the log, its fsync left to the tracker. Without:
    durable before returning, and what fails is taken out of the log again. Raises what the
    log raises."""
    plog, epoch = log_for(partition)
    if tracker is not None:
        syncs = DeferredSyncs()
        result = plog.append(
            bytearray(batch), leader_epoch=epoch, now_ms=now_ms, origin=AppendOrigin.COORDINATOR, syncs=syncs
        )
        tracker.appended(partition, plog, result.first_offset, syncs)
    else:
        plog.append_durably(bytearray(batch), leader_epoch=epoch, now_ms=now_ms, origin=AppendOrigin.COORDINATOR)


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
