"""Transactional offset commits (TxnOffsetCommit), held until their transaction ends.

Kafka's layout (the old GroupMetadataManager and the new OffsetMetadataManager alike): the
offsets go into the group's partition of ``__consumer_offsets`` as ordinary OffsetCommit
records, but in a *transactional* batch carrying the producer id and epoch. They stay pending,
per producer id, until the transaction coordinator writes the transaction's marker into that
partition: a commit marker makes them the group's committed offsets, an abort marker drops
them. While any are pending for a partition, OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for it (KIP-447).

A plain OffsetCommit of the same partition written after a pending transactional one wins, as
in Kafka (which compares record offsets): the pending entry is then marked superseded and is
not applied at commit.

At a load, ``OffsetsLogScan`` reads a partition once, in log order (on a worker thread: it is
pure): the plain records come out decoded as it goes, in order, and once every batch was fed,
what committed transactions left (applied after the plain records), what open ones hold pending,
and nothing of what aborted (``apply_transactional_offsets``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from kafkalike.group.api import CommitPartition, FetchedOffset, FetchResult
from kafkalike.group.classic import ClassicGroup
from kafkalike.group.offsets import OffsetAndMetadata
from kafkalike.group.records import (
    CoordinatorRecord,
    GroupRecord,
    OffsetRecord,
    RecordError,
    decode_record,
    offset_commit_record,
)
from kafkalike.group.state import GroupState
from kafkalike.log import InvalidProducerEpoch, LogError, PartitionLog, RecordBatchTooLarge
from kafkalike.log.coordinator_log import SyncTracker, append_coordinator_batch, log_batches
from kafkalike.log.producer_state import CONTROL_COMMIT, parse_control_marker
from kafkalike.protocol.errors import ErrorCode, ProtocolError
from kafkalike.protocol.records import Record, RecordBatchHeader, build_batch, decode_records

if TYPE_CHECKING:
    from kafkalike.group.coordinator import GroupCoordinator

log = logging.getLogger("kafkalike.group.txn")
E = ErrorCode
OffsetKey = tuple[str, str, int]  # group, topic, partition


@dataclass
class _Pending:
    record: CoordinatorRecord
    superseded: bool = False


@dataclass
class PendingTxnOffsets:
    """Pending transactional offsets: producer id -> (group, topic, partition) -> record."""

    by_producer: dict[int, dict[OffsetKey, _Pending]] = field(default_factory=dict)
    producers_by_group: dict[str, set[int]] = field(default_factory=dict)

    def add(self, producer_id: int, key: OffsetKey, record: CoordinatorRecord, superseded: bool = False) -> None:
        self.by_producer.setdefault(producer_id, {})[key] = _Pending(record, superseded)
        self.producers_by_group.setdefault(key[0], set()).add(producer_id)

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        key = (group_id, topic, partition)
        return any(key in self.by_producer.get(p, {}) for p in self.producers_by_group.get(group_id, ()))

    def drop_groups(self, doomed: Callable[[str], bool]) -> None:
        """Forget the pending offsets of the groups ``doomed`` accepts."""
        for group_id in [g for g in self.producers_by_group if doomed(g)]:
            for producer_id in self.producers_by_group.pop(group_id):
                held = self.by_producer.get(producer_id, {})
                for key in [k for k in held if k[0] == group_id]:
                    del held[key]
                if not held:
                    self.by_producer.pop(producer_id, None)

    def on_regular_commit(self, group_id: str, topic: str, partition: int) -> None:
        """A plain OffsetCommit of the partition was written: it is newer than anything pending."""
        key = (group_id, topic, partition)
        for producer_id in self.producers_by_group.get(group_id, ()):
            pending = self.by_producer[producer_id].get(key)
            if pending is not None:
                pending.superseded = True

    def complete(self, producer_id: int, owns: Callable[[str], bool]) -> list[CoordinatorRecord]:
        """Take the producer's pending offsets of the groups ``owns`` accepts (those whose offsets
        partition got the marker); the records to apply if the transaction committed."""
        entries = self.by_producer.get(producer_id)
        if not entries:
            return []
        taken = {k: v for k, v in entries.items() if owns(k[0])}
        for key in taken:
            del entries[key]
        if not entries:
            del self.by_producer[producer_id]
        for group_id in {k[0] for k in taken}:
            if not any(k[0] == group_id for k in entries):
                producers = self.producers_by_group[group_id]
                producers.discard(producer_id)
                if not producers:
                    del self.producers_by_group[group_id]
        return [p.record for p in taken.values() if not p.superseded]

    def count(self) -> int:
        return sum(len(e) for e in self.by_producer.values())

    def mark_unstable(self, group_id: str, result: FetchResult) -> FetchResult:
        """OffsetFetch with require_stable: UNSTABLE_OFFSET_COMMIT where offsets are pending."""
        if group_id not in self.producers_by_group:
            return result
        topics = []
        for topic, offsets in result.topics:
            topics.append(
                (
                    topic,
                    tuple(
                        FetchedOffset(f.partition, error=E.UNSTABLE_OFFSET_COMMIT)
                        if self.has_pending(group_id, topic, f.partition)
                        else f
                        for f in offsets
                    ),
                )
            )
        return replace(result, topics=tuple(topics))


# -- writing ---------------------------------------------------------------------------------


class TxnWriteError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class LogTxnOffsetWriter:
    """Appends transactional batches of offset records to ``__consumer_offsets`` partitions that
    ``log_for(partition)`` returns with their leader epoch, flushed before returning; the
    producer-state checks fence an old epoch (INVALID_PRODUCER_EPOCH)."""

    def __init__(
        self,
        log_for: Callable[[int], tuple[PartitionLog, int]],
        on_append: Callable[[int], None] | None = None,
        tracker: SyncTracker | None = None,
    ) -> None:
        self._log_for = log_for
        self._on_append = on_append
        # Given, the flush is left to it (off the event loop) and the caller waits for it.
        self._tracker = tracker

    def append(
        self, partition: int, records: Sequence[CoordinatorRecord], producer_id: int, producer_epoch: int, now_ms: int
    ) -> None:
        batch = build_batch(
            [Record(key=k, value=v) for k, v in records],
            base_timestamp=now_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0,
            transactional=True,
        )
        try:
            append_coordinator_batch(self._log_for, partition, batch, now_ms, self._tracker)
        except InvalidProducerEpoch as exc:
            raise TxnWriteError(E.INVALID_PRODUCER_EPOCH, str(exc)) from exc
        except RecordBatchTooLarge as exc:
            raise TxnWriteError(E.INVALID_COMMIT_OFFSET_SIZE, str(exc)) from exc
        except (LogError, OSError) as exc:
            raise TxnWriteError(E.NOT_COORDINATOR, str(exc)) from exc
        if self._tracker is None and self._on_append is not None:  # a tracker calls its own once durable
            self._on_append(partition)


# -- TxnOffsetCommit -------------------------------------------------------------------------


@dataclass(frozen=True)
class TxnCommitRequest:
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    partitions: tuple[CommitPartition, ...]


def _validate_classic(group: ClassicGroup, request: TxnCommitRequest) -> ErrorCode | None:
    """Kafka's ClassicGroup.validateOffsetCommit for a transactional commit: unlike a plain
    commit, one without member information is accepted from a non-empty group (the producer's
    sendOffsetsToTransaction(offsets, groupId)), and a rebalance in progress does not refuse it."""
    if group.is_in(GroupState.DEAD):
        return E.COORDINATOR_NOT_AVAILABLE
    if request.generation_id < 0 and group.is_empty:
        return None
    if request.generation_id >= 0 or request.member_id or request.group_instance_id is not None:
        error = group.validate_member(request.member_id, request.group_instance_id)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
    return None


def _validate(coordinator: GroupCoordinator, request: TxnCommitRequest, now_ms: int) -> tuple[ErrorCode | None, bool]:
    """(error, whether a simple group was created for the commit)."""
    consumer_group = coordinator.consumer_groups.get(request.group_id)
    if consumer_group is not None:
        error = consumer_group.validate_offset_commit(request.member_id, request.generation_id, True)
        return (E.ILLEGAL_GENERATION if error is E.STALE_MEMBER_EPOCH else error), False
    group = coordinator.groups.get(request.group_id)
    if group is None:
        if request.generation_id >= 0:
            return E.ILLEGAL_GENERATION, False
        coordinator.new_group(request.group_id, now_ms)  # a "simple" group, as Kafka creates
        return None, True
    return _validate_classic(group, request), False


def commit_transactional_offsets(
    coordinator: GroupCoordinator, writer: LogTxnOffsetWriter, request: TxnCommitRequest, now_ms: int
) -> list[tuple[str, int, ErrorCode]]:
    """TxnOffsetCommit (the transaction itself was verified by the caller): one (topic,
    partition, error) per requested partition, in order. Accepted offsets are durable and
    pending when this returns."""
    parts = request.partitions
    gid = request.group_id
    error, created = _validate(coordinator, request, now_ms)
    if error is not None:
        return [(p.topic, p.partition, error) for p in parts]
    results: list[tuple[str, int, ErrorCode]] = []
    accepted: list[tuple[OffsetKey, CoordinatorRecord]] = []
    for p in parts:
        metadata = p.metadata or ""
        if len(metadata) > coordinator.config.offset_metadata_max_bytes:
            results.append((p.topic, p.partition, E.OFFSET_METADATA_TOO_LARGE))
            continue
        offset = OffsetAndMetadata(p.offset, p.leader_epoch, metadata, now_ms)
        accepted.append(((gid, p.topic, p.partition), offset_commit_record(gid, p.topic, p.partition, offset)))
        results.append((p.topic, p.partition, E.NONE))
    if accepted:
        try:
            writer.append(
                coordinator.partition_for(gid),
                [r for _, r in accepted],
                request.producer_id,
                request.producer_epoch,
                now_ms,
            )
        except TxnWriteError as exc:
            log.info("group %s: transactional offsets of producer %d refused: %s", gid, request.producer_id, exc)
            if created and not coordinator.offsets.has_offsets(gid):
                coordinator.groups.pop(gid, None)
            return [(t, n, exc.code if e is E.NONE else e) for t, n, e in results]
        for key, record in accepted:
            coordinator.txn_offsets.add(request.producer_id, key, record)
    return results


def complete_transaction(
    coordinator: GroupCoordinator, offsets_partition: int, producer_id: int, commit: bool, now_ms: int
) -> int:
    """The producer's transaction ended with a marker in ``offsets_partition`` of
    ``__consumer_offsets``: apply (commit) or drop (abort) its pending offsets of the groups
    living there. Returns how many offsets became committed."""
    records = coordinator.txn_offsets.complete(
        producer_id, lambda group_id: coordinator.partition_for(group_id) == offsets_partition
    )
    if not commit:
        return 0
    for key, value in records:
        coordinator.replay(key, value, now_ms)
    return len(records)


# -- start-up ----------------------------------------------------------------------------------


def _offset_records(
    blob: bytes, pos: int, header: RecordBatchHeader
) -> Iterator[tuple[int, OffsetKey, CoordinatorRecord, OffsetRecord]]:
    """(record offset, key, record, decoded) of the OffsetCommit records in one batch."""
    try:
        records = decode_records(blob, pos, header)
    except ProtocolError as exc:
        log.warning("skipping an unreadable batch of the offsets topic: %s", exc)
        return
    for record in records:
        try:
            decoded = decode_record(record.key, record.value)
        except RecordError:
            continue
        if isinstance(decoded, OffsetRecord) and record.key is not None:
            key = (decoded.group_id, decoded.topic, decoded.partition)
            yield record.offset(header), key, (record.key, record.value), decoded


@dataclass(frozen=True, slots=True)
class PlainRecord:
    """A record of a plain batch as the scan decoded it; ``record`` None: another record type
    (KIP-848 groups' records), decoded by the coordinator when applied."""

    key: bytes
    value: bytes | None
    record: OffsetRecord | GroupRecord | None


@dataclass(frozen=True)
class TransactionalOffsets:
    """What transactional batches left in a partition, known once all of it was read: the
    committed offsets no later plain commit replaced, and the open transactions' offsets."""

    committed: tuple[tuple[CoordinatorRecord, OffsetRecord], ...]
    pending: tuple[tuple[int, OffsetKey, CoordinatorRecord, bool], ...]  # producer id, key, record, superseded
    found: int  # transactional records seen


class OffsetsLogScan:
    """One ``__consumer_offsets`` partition read back for a load, batch by batch in log order
    (``feed``: the plain records, decoded), then ``finish`` (what transactions left). Touches no
    coordinator, so it runs on a worker thread."""

    def __init__(self) -> None:
        self._last_plain: dict[OffsetKey, int] = {}
        self._committed: dict[OffsetKey, tuple[int, CoordinatorRecord, OffsetRecord]] = {}
        self._open: dict[int, dict[OffsetKey, tuple[int, CoordinatorRecord, OffsetRecord]]] = {}
        self._found = 0

    def feed(self, blob: bytes, pos: int, header: RecordBatchHeader) -> list[PlainRecord]:
        pid = header.producer_id
        if header.is_control:
            marker = parse_control_marker(blob, pos, header) if pid >= 0 else None
            entries = self._open.pop(pid, {}) if marker is not None else {}
            if marker is not None and marker.control_type == CONTROL_COMMIT:
                for key, entry in entries.items():
                    if entry[0] > self._committed.get(key, (-1,))[0]:
                        self._committed[key] = entry
            return []
        if header.is_transactional:
            for offset, key, record, decoded in _offset_records(blob, pos, header):
                if pid >= 0:
                    self._open.setdefault(pid, {})[key] = (offset, record, decoded)
                    self._found += 1
                else:
                    self._last_plain[key] = offset
            return []
        return self._plain(blob, pos, header)

    def _plain(self, blob: bytes, pos: int, header: RecordBatchHeader) -> list[PlainRecord]:
        try:
            records = decode_records(blob, pos, header)
        except ProtocolError as exc:
            log.warning("skipping an unreadable batch at offset %d: %s", header.base_offset, exc)
            return []
        plain: list[PlainRecord] = []
        for record in records:
            if record.key is None:
                continue
            try:
                decoded = decode_record(record.key, record.value)
            except RecordError as exc:
                log.warning("skipping an unreadable record in the offsets topic: %s", exc)
                continue
            if isinstance(decoded, OffsetRecord):
                self._last_plain[(decoded.group_id, decoded.topic, decoded.partition)] = record.offset(header)
            plain.append(PlainRecord(record.key, record.value, decoded))
        return plain

    def finish(self) -> TransactionalOffsets:
        last_plain = self._last_plain
        committed = tuple(
            (record, decoded)
            for key, (offset, record, decoded) in self._committed.items()
            if offset > last_plain.get(key, -1)
        )
        pending = tuple(
            (pid, key, record, last_plain.get(key, -1) > offset)
            for pid, entries in self._open.items()
            for key, (offset, record, _) in entries.items()
        )
        return TransactionalOffsets(committed, pending, self._found)


def apply_transactional_offsets(coordinator: GroupCoordinator, found: TransactionalOffsets, now_ms: int) -> None:
    """After the plain records: committed transactions' offsets applied, open ones' held pending."""
    for (record_key, record_value), decoded in found.committed:
        coordinator.replay_decoded(record_key, record_value, decoded, now_ms)
    for pid, key, record, superseded in found.pending:
        coordinator.txn_offsets.add(pid, key, record, superseded=superseded)


def replay_transactional_offsets(coordinator: GroupCoordinator, plog: PartitionLog, now_ms: int) -> int:
    """A pass over one ``__consumer_offsets`` partition after its plain records were replayed
    (``read_records``): what transactions left applied, at once. Returns how many transactional
    records were found."""
    scan = OffsetsLogScan()
    for blob, pos, header in log_batches(plog):
        scan.feed(blob, pos, header)
    found = scan.finish()
    apply_transactional_offsets(coordinator, found, now_ms)
    return found.found
