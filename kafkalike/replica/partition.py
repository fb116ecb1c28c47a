"""One partition as this broker holds it (Kafka's ``Partition``): its log, its role, its epochs.

A ``Partition`` is a plain object over its ``PartitionLog``, changed only in synchronous code
(trio runs one task at a time), with no clock of its own (``now_ms`` is passed in) and nothing
that waits: whoever waits for it (long-poll fetch, acks=all later) waits on the server's
waiters, which ``on_progress`` tells when the high watermark or the log end moved.

What it keeps, as Kafka's Partition keeps it:

- role: leader or follower of the partition (today's single broker leads everything; a
  follower refuses client appends and reads with NOT_LEADER_OR_FOLLOWER);
- leader epoch and partition epoch, the replicas and the ISR, as the controller last set them;
- the high watermark, written by ``_set_high_watermark`` alone: on the leader it is the
  smallest log end over the ISR, which with only this replica in it is the log end after every
  append (``maybe_increment_high_watermark``); the coordinators' internal partitions bound it by
  what is durable (``update_high_watermark``);
- the leader-epoch check of a request (``check_leader_epoch``, Kafka's checkCurrentLeaderEpoch).

Appends come in two steps so the file work can run off the event loop: ``append_as_leader``
(may raise RollNeeded, and may leave fsyncs in ``syncs``), then ``complete_append`` once those
ran (or failed). While an append's file work is under way ``write_in_flight`` is set; the
server lets the partition's next append wait for it (as Kafka's appends wait for the log lock).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from kafkalike.log.config import LogConfig
from kafkalike.log.partition_log import AppendResult, FileRange, PartitionLog
from kafkalike.log.producer_state import ProducerEntry
from kafkalike.log.storage import Syncs
from kafkalike.log.txn_index import AbortedTxn
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import RecordBatchHeader

TopicPartition = tuple[str, int]
NO_EPOCH = -1  # a request that names no leader epoch (Kafka's Optional.empty)
CONSUMER_REPLICA_ID = -1  # Fetch's replica_id from a consumer; a follower sends its broker id


class Role(Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


class Isolation(Enum):
    """How far a read may go: Kafka's FetchIsolation."""

    LOG_END = "log_end"  # a follower's fetch: everything the leader has
    HIGH_WATERMARK = "high_watermark"  # read_uncommitted
    TXN_COMMITTED = "txn_committed"  # read_committed: up to the last stable offset


class PartitionError(Exception):
    """A request this partition refuses, with the Kafka error code to answer it with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The partition's state as the controller decided it (its PartitionRegistration's parts)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class LeaderAppend(NamedTuple):
    """What the acks outcome of a leader append needs, once it completed."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless stamped with LogAppendTime
    log_start_offset: int
    duplicate: bool  # a retried idempotent batch: nothing written, the original's offsets


class OffsetAnswer(NamedTuple):
    """A ListOffsets answer for one partition: -1 for what is not known."""

    timestamp: int
    offset: int
    leader_epoch: int


# ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP = (
    -1,
    -2,
    -3,
    -4,
    -5,
)
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


class PartitionRead(NamedTuple):
    """A read's file ranges (sent with sendfile) and the offsets the answer carries."""

    ranges: list[FileRange]
    size_bytes: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[AbortedTxn] | None  # for TXN_COMMITTED reads: the aborted transactions overlapping them


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID,
        log: PartitionLog,
        *,
        local_broker_id: int,
        on_progress: Callable[[TopicPartition], None] = lambda tp: None,
    ) -> None:
        self.topic = topic
        self.index = index
        self.tp: TopicPartition = (topic, index)
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self._on_progress = on_progress
        # Until the controller says otherwise, as on today's single node: led here, epoch 0.
        self.role = Role.LEADER
        self.leader_id = local_broker_id
        self.leader_epoch = 0
        self.partition_epoch = 0
        self.replicas: tuple[int, ...] = (local_broker_id,)
        self.isr: tuple[int, ...] = (local_broker_id,)
        # Set while an append's (or roll's) file work runs on a worker thread: the next append
        # waits for it, so a failed flush can still cut its own append off alone.
        self.write_in_flight = False
        self.maybe_increment_high_watermark()

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, {self.role.value}, epoch {self.leader_epoch})"

    # -- role and epochs ----------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def make_leader(self, state: LeaderAndIsr) -> bool:
        """Lead with the controller's ``state``; True when this replica was not leading this
        leader epoch before (Kafka's makeLeader: a new term starts)."""
        new_term = not self.is_leader or state.leader_epoch != self.leader_epoch
        self._apply(Role.LEADER, state)
        self.maybe_increment_high_watermark()
        return new_term

    def make_follower(self, state: LeaderAndIsr) -> bool:
        """Follow ``state.leader`` (-1: no leader now); True when the leader or its epoch changed
        (the follower must then fetch from the new leader, in issue 15's fetcher)."""
        changed = self.is_leader or state.leader != self.leader_id or state.leader_epoch != self.leader_epoch
        self._apply(Role.FOLLOWER, state)
        return changed

    def _apply(self, role: Role, state: LeaderAndIsr) -> None:
        self.role = role
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = state.replicas
        self.isr = state.isr
        self._on_progress(self.tp)  # waiters look again: a fetch answers NOT_LEADER_OR_FOLLOWER now

    def check_leader_epoch(self, requested_epoch: int) -> ErrorCode:
        """Kafka's checkCurrentLeaderEpoch: a request naming an older epoch than this replica's is
        FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (this broker has not heard of it
        yet); -1 (none named) passes."""
        if requested_epoch == NO_EPOCH or requested_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if requested_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH

    def check_request(self, requested_epoch: int = NO_EPOCH, *, require_leader: bool = True) -> None:
        """Kafka's getLocalLog checks in its order: the epoch first, then leadership. Raises
        PartitionError with the code to answer."""
        code = self.check_leader_epoch(requested_epoch)
        if code is not ErrorCode.NONE:
            raise PartitionError(code, f"leader epoch {requested_epoch} of {self.topic}-{self.index}: {code.name}")
        if require_leader and not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker is not the leader of {self.topic}-{self.index}"
            )

    # -- offsets ------------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self.log.config

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def maybe_increment_high_watermark(self) -> bool:
        """On the leader: the high watermark moves to the smallest log end offset over the ISR.
        With no follower state yet (replication comes next), the ISR's only log is this one."""
        if not self.is_leader:
            return False
        return self._set_high_watermark(self.log.log_end_offset)

    def update_high_watermark(self, offset: int) -> bool:
        """Set by a writer that bounds it itself (the coordinators' partitions: by what is
        durable). True when it moved."""
        return self._set_high_watermark(offset)

    def _set_high_watermark(self, offset: int) -> bool:
        """The one place the high watermark is written (clamped to the log by the log)."""
        before = self.log.high_watermark
        self.log.high_watermark = offset
        self.notify_progress()
        return self.log.high_watermark != before

    def notify_progress(self) -> None:
        """Wake whoever waits on this partition (the log changed under it: an append, a marker,
        a truncation, a deletion)."""
        self._on_progress(self.tp)

    # -- producer state ---------------------------------------------------------------------------

    def producer(self, producer_id: int) -> ProducerEntry | None:
        return self.log.producer_state.producers.get(producer_id)

    def producers(self) -> Iterable[ProducerEntry]:
        return self.log.producer_state.producers.values()

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer's transaction is already open here (its first batch was verified)."""
        entry = self.producer(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None and entry.epoch == producer_epoch

    # -- append -------------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytearray | memoryview,
        *,
        now_ms: int,
        log_append_time: bool,
        syncs: Syncs,
        defer_roll: bool = False,
        known_header: RecordBatchHeader | None = None,
    ) -> AppendResult:
        """The first step of a client append: offsets and this leader's epoch assigned, the
        batches in the log (not yet counted: see ``complete_append``). Raises PartitionError
        NOT_LEADER_OR_FOLLOWER on a follower, RollNeeded when ``defer_roll`` and a new segment
        must be made first, and the log's errors (nothing appended then). ``known_header``:
        ``records`` is one batch whose header validation read (``PartitionLog.append``)."""
        if self.role is not Role.LEADER:
            self.check_request()  # raises NOT_LEADER_OR_FOLLOWER
        return self.log.append(
            records,
            leader_epoch=self.leader_epoch,
            log_append_time=log_append_time,
            syncs=syncs,
            now_ms=now_ms,
            defer_roll=defer_roll,
            known_header=known_header,
        )

    def complete_append(self, result: AppendResult, error: OSError | None, now_ms: int) -> LeaderAppend:
        """The second step, once the syncs ``append_as_leader`` left ran (``error``: how they
        failed): the append counted (high watermark moved, waiters told) or, after a failed
        flush, cut off and KafkaStorageError raised."""
        if result.flush is not None:
            self.log.complete_append(result, error, now_ms)
        self.maybe_increment_high_watermark()
        return LeaderAppend(
            result.first_offset,
            result.last_offset,
            result.log_append_time_ms,
            result.log_start_offset,
            result.duplicate,
        )

    # -- read ---------------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation: Isolation,
        replica_id: int = CONSUMER_REPLICA_ID,
        current_leader_epoch: int = NO_EPOCH,
        min_one_batch: bool = True,
    ) -> PartitionRead:
        """Whole batches from ``fetch_offset``, at most ``max_bytes`` (the first whole when
        ``min_one_batch``), bounded by the isolation level. A follower's fetch (``replica_id`` a
        broker id) must reach the leader; so must a consumer's (no follower fetching, KIP-392,
        yet). Raises PartitionError (epoch, leadership) and the log's OffsetOutOfRange / OSError."""
        self.check_request(current_leader_epoch)
        if replica_id >= 0:
            isolation = Isolation.LOG_END
        log = self.log
        if isolation is Isolation.TXN_COMMITTED:
            limit = log.last_stable_offset
        elif isolation is Isolation.HIGH_WATERMARK:
            limit = log.high_watermark
        else:
            limit = log.log_end_offset
        result = log.read(fetch_offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)
        aborted = log.aborted_transactions(fetch_offset, result) if isolation is Isolation.TXN_COMMITTED else None
        return PartitionRead(
            result.ranges,
            result.size,
            result.high_watermark,
            result.last_stable_offset,
            result.log_start_offset,
            aborted,
        )

    # -- deleting records ---------------------------------------------------------------------------

    def delete_records_on_leader(self, offset: int, *, now_ms: int, syncs: Syncs) -> int:
        """DeleteRecords (Kafka's deleteRecordsOnLeader): the log start moved up to ``offset``
        (-1: the high watermark); the new log start. ``syncs`` takes the files' renames and
        unlinks; the caller checkpoints the new start. PartitionError OFFSET_OUT_OF_RANGE for an
        offset past the high watermark, NOT_LEADER_OR_FOLLOWER on a follower."""
        self.check_request()
        target = self.high_watermark if offset == -1 else offset
        if target < 0 or target > self.high_watermark:
            raise PartitionError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {target} of partition {self.topic}-{self.index} "
                f"since it is larger than the high watermark {self.high_watermark}",
            )
        start = self.log.delete_records_before(target, now_ms=now_ms, syncs=syncs)
        self.notify_progress()
        return start

    # -- lookups ------------------------------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        return self.log.size_in_bytes

    @property
    def directory_path(self) -> str:
        """Where its files are (for error reports)."""
        return self.log.directory.path

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.log.end_offset_for_epoch(epoch)

    def last_offset_for_leader_epoch(self, leader_epoch: int, current_leader_epoch: int = NO_EPOCH) -> tuple[int, int]:
        """OffsetForLeaderEpoch (Kafka's lastOffsetForLeaderEpoch): (largest epoch <= ``leader_epoch``,
        its end offset), or (-1, -1). Raises PartitionError for the request's epoch; answered by
        the leader only."""
        self.check_request(current_leader_epoch)
        return self.log.end_offset_for_epoch(leader_epoch)

    def fetch_offset_for_timestamp(
        self, timestamp: int, *, isolation: Isolation, current_leader_epoch: int = NO_EPOCH
    ) -> OffsetAnswer | None:
        """ListOffsets (Kafka's fetchOffsetForTimestamp): the offset for a timestamp or one of the
        special targets, bounded by what ``isolation`` may read (an offset at or past the bound is
        not answered: None). Raises PartitionError for the request's epoch or leadership, and for
        an unknown negative target (INVALID_REQUEST)."""
        self.check_request(current_leader_epoch)
        log = self.log
        fetchable = log.last_stable_offset if isolation is Isolation.TXN_COMMITTED else log.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            return OffsetAnswer(-1, fetchable, self.leader_epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return OffsetAnswer(-1, log.log_start_offset, self.leader_epoch)
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return OffsetAnswer(-1, -1, -1)  # nothing is tiered: no tiered or pending-upload offset
        if timestamp == MAX_TIMESTAMP:
            found = log.max_timestamp()
            if found is None or found.offset >= fetchable:
                return None
            return OffsetAnswer(found.timestamp, found.offset, self.leader_epoch)
        if timestamp < 0:
            raise PartitionError(ErrorCode.INVALID_REQUEST, f"unknown ListOffsets target {timestamp}")
        hit = log.offset_for_timestamp(timestamp)
        if hit is None or hit.offset >= fetchable:
            return None
        return OffsetAnswer(hit.timestamp, hit.offset, self.leader_epoch)
