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
from typing import Any, NamedTuple, Protocol

from kafkalike.log.config import LogConfig
from kafkalike.log.errors import OffsetOutOfRange
from kafkalike.log.partition_log import AppendResult, FileRange, PartitionLog
from kafkalike.log.producer_state import ProducerEntry
from kafkalike.log.storage import Syncs
from kafkalike.log.txn_index import AbortedTxn
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import RecordBatchHeader
from kafkalike.replica.follower_state import (
    FollowerState,
    IsrChange,
    IsrChangeKind,
    StaleBrokerEpoch,
)

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


DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000  # replica.lag.time.max.ms


class BrokerEligibility(Protocol):
    """Which brokers may join an ISR (KIP-841), as this broker's metadata has them."""

    def isr_eligible_epoch(self, broker_id: int) -> int | None:
        """The broker's registered epoch if it is registered, unfenced and not shutting down;
        None otherwise."""
        ...

    def local_broker_epoch(self) -> int:
        """This broker's own epoch (-1 before it registered)."""
        ...

    def is_alive(self, broker_id: int) -> bool:
        """Registered and unfenced (Kafka's metadata cache hasAliveBroker)."""
        ...


class AllEligible:
    """Every broker eligible at epoch -1 (a partition outside a cluster's metadata: tests)."""

    def isr_eligible_epoch(self, broker_id: int) -> int | None:
        return -1

    def local_broker_epoch(self) -> int:
        return -1

    def is_alive(self, broker_id: int) -> bool:
        return True


ALL_ELIGIBLE = AllEligible()


class DivergingEpoch(NamedTuple):
    """A follower's fetch whose last fetched epoch is not the leader's log at its fetch offset:
    where the follower should look for its truncation point (Fetch v12+ DivergingEpoch)."""

    epoch: int
    end_offset: int


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
    leader_recovery_state: int = 0  # 1: RECOVERING (elected uncleanly, Kafka's LeaderRecoveryState)


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
    diverging: DivergingEpoch | None = None  # a follower's log parts from the leader's: nothing read
    log_end_offset: int = -1  # the leader's log end offset at the read (a follower's caught-up rule)


def alter_partition_answer(entry: Any, replicas: tuple[int, ...]) -> tuple[ErrorCode, LeaderAndIsr | None]:
    """One partition of an AlterPartition answer (its decoded entry) as ``isr_change_answered``
    takes it: the error, and with NONE the state the controller committed."""
    error = ErrorCode(entry.error_code)
    if error is not ErrorCode.NONE:
        return error, None
    return error, LeaderAndIsr(
        entry.leader_id,
        entry.leader_epoch,
        entry.partition_epoch,
        replicas,
        tuple(entry.isr),
        entry.leader_recovery_state,
    )


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
        brokers: BrokerEligibility = ALL_ELIGIBLE,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
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
        self.leader_recovery_state = 0
        # On the leader: what it knows of each follower, the ISR change it has asked the
        # controller for (one at a time), and where its current leader epoch began.
        self.brokers = brokers
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.followers: dict[int, FollowerState] = {}
        self.pending_isr: IsrChange | None = None
        self.leader_epoch_start_offset: int | None = None
        self.durable_end: int | None = None  # see ``update_high_watermark``
        # Set while an append's (or roll's) file work runs on a worker thread: the next append
        # waits for it, so a failed flush can still cut its own append off alone.
        self.write_in_flight = False
        # The high watermark stays the log's (the checkpointed one) until a role is taken: a
        # reopened replica's log may end with batches no other replica has (a leader killed with
        # appends in flight), which are not committed. ``lead_alone`` is the single-node start.

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, {self.role.value}, epoch {self.leader_epoch})"

    def lead_alone(self, now_ms: int) -> None:
        """Keep the provisional role (led here, the only replica): the high watermark at the log end."""
        self.maybe_increment_high_watermark(now_ms)

    # -- role and epochs ----------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def make_leader(self, state: LeaderAndIsr, *, now_ms: int) -> bool:
        """Lead with the controller's ``state`` (Kafka's makeLeader); True when this replica was
        not leading this leader epoch before (a new term starts). At a new term the epoch starts
        at the log end (in the epoch cache at once, so a follower that wrote a later epoch of an
        earlier leader truncates to the right offset), and each follower's state is reset: an
        ISR member counts as caught up now. A registration older than the one applied (a lower
        partition epoch) is ignored."""
        if self.is_leader and state.partition_epoch < self.partition_epoch:
            return False
        new_leader = not self.is_leader
        new_term = new_leader or state.leader_epoch != self.leader_epoch or self.leader_epoch_start_offset is None
        self._apply(Role.LEADER, state)
        if new_term:
            start = self.log.log_end_offset
            self.leader_epoch_start_offset = start
            latest = self.log.epoch_cache.latest_epoch
            # A restarted broker replays the metadata log one batch at a time, so it passes
            # through leaderships its log has outlived (the log holds a later leader's
            # batches). Kafka's loader publishes only once caught up and is never told such an
            # epoch; assigning it would wipe the later epochs' entries (the follower would
            # then name a stale last fetched epoch and truncate below its high watermark).
            if state.leader_epoch >= 0 and (latest is None or state.leader_epoch >= latest):
                self.log.epoch_cache.assign(state.leader_epoch, start, defer=True)
        wanted = set(state.replicas) - {self.local_broker_id}
        for gone in set(self.followers) - wanted:
            del self.followers[gone]
        for broker_id in sorted(wanted):
            follower = self.followers.get(broker_id)
            if follower is None:
                follower = self.followers[broker_id] = FollowerState(broker_id)
            if new_term:
                follower.reset(now_ms, new_leader=new_leader, in_sync=broker_id in state.isr)
        self.maybe_increment_high_watermark(now_ms)
        return new_term

    def make_follower(self, state: LeaderAndIsr, *, now_ms: int) -> bool:
        """Follow ``state.leader`` (-1: no leader now); True when the leader or its epoch changed
        (the follower must then fetch from the new leader). The high watermark stays: the
        follower learns the leader's with its next fetch."""
        if not self.is_leader and state.partition_epoch < self.partition_epoch:
            return False
        changed = self.is_leader or state.leader != self.leader_id or state.leader_epoch != self.leader_epoch
        self._apply(Role.FOLLOWER, state)
        self.followers.clear()
        self.leader_epoch_start_offset = None
        return changed

    def _apply(self, role: Role, state: LeaderAndIsr) -> None:
        self.role = role
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = state.replicas
        self.isr = state.isr
        self.leader_recovery_state = state.leader_recovery_state
        self.pending_isr = None  # the controller's registration replaces any ISR change in flight
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

    @property
    def effective_min_isr(self) -> int:
        """min.insync.replicas, but never more than the replicas there are (Kafka's effectiveMinIsr)."""
        return min(self.log.config.min_insync_replicas, len(self.replicas))

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR with an addition in flight counted and a removal in flight not yet applied (KIP-497)."""
        return self.pending_isr.maximal_isr if self.pending_isr is not None else self.isr

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr

    @property
    def is_under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """On the leader (Kafka's maybeIncrementLeaderHW): the smallest log end offset over this
        replica, the maximal ISR, and any follower caught up and eligible that has not joined it
        yet (so a catching-up follower is not left behind for ever); never backwards, and not
        at all while the committed ISR is below the effective min.insync.replicas (KIP-966)."""
        if not self.is_leader or self.is_under_min_isr:
            return False
        leader_end = self.log.log_end_offset
        new_high_watermark = leader_end
        maximal = self.maximal_isr
        for follower in self.followers.values():
            if follower.log_end_offset < new_high_watermark and (
                follower.broker_id in maximal
                or (
                    follower.is_caught_up(leader_end, now_ms, self.replica_lag_time_max_ms)
                    and self._isr_eligible(follower)
                )
            ):
                new_high_watermark = follower.log_end_offset
        if self.durable_end is not None:
            new_high_watermark = min(new_high_watermark, self.durable_end)
        if new_high_watermark <= self.log.high_watermark:
            return False
        return self._set_high_watermark(new_high_watermark)

    def _isr_eligible(self, follower: FollowerState) -> bool:
        """Kafka's isReplicaIsrEligible: registered, unfenced, not shutting down, and fetching
        with the broker epoch the metadata registers (or none named)."""
        registered = self.brokers.isr_eligible_epoch(follower.broker_id)
        if registered is None or follower.broker_epoch is None:
            return False
        return follower.broker_epoch == -1 or follower.broker_epoch == registered

    # -- the leader's view of its followers ---------------------------------------------------------

    def update_follower_fetch_state(
        self,
        replica_id: int,
        *,
        broker_epoch: int,
        fetch_offset: int,
        log_start_offset: int,
        leader_end_offset: int,
        now_ms: int,
    ) -> IsrChange | None:
        """A follower's fetch was read (Kafka's updateFollowerFetchState): its position kept, the
        ISR expansion it allows proposed (returned, to send as AlterPartition; already pending
        here), the high watermark moved. Raises PartitionError NOT_LEADER_OR_FOLLOWER for a
        replica that is not one of the partition's, or a stale broker epoch (KIP-903)."""
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_leader:
            raise PartitionError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {replica_id} is not a follower of {self.topic}-{self.index} led here",
            )
        # Looked at only when the follower's log start moved: the usual fetch costs nothing here.
        low_watermark = self.low_watermark if log_start_offset != follower.log_start_offset else None
        try:
            follower.update_fetch_state(
                fetch_offset,
                log_start_offset,
                now_ms,
                leader_end_offset,
                broker_epoch,
                self.brokers.isr_eligible_epoch(replica_id),
            )
        except StaleBrokerEpoch as exc:
            raise PartitionError(ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc)) from None
        change = self._maybe_expand_isr(follower)
        moved = self.maybe_increment_high_watermark(now_ms)
        if not moved and low_watermark is not None and self.low_watermark > low_watermark:
            self.notify_progress()  # a DeleteRecords waits for it (Kafka's leaderLWIncremented)
        return change

    def _maybe_expand_isr(self, follower: FollowerState) -> IsrChange | None:
        """Kafka's maybeExpandIsr: a follower not in the ISR joins it once its log reaches the high
        watermark and the start of this leader's epoch, if it is eligible and nothing else is in
        flight."""
        if self.pending_isr is not None or follower.broker_id in self.isr or not self._isr_eligible(follower):
            return None
        start = self.leader_epoch_start_offset
        if start is None or follower.log_end_offset < self.log.high_watermark or follower.log_end_offset < start:
            return None
        return self._propose(IsrChangeKind.EXPAND, (*self.isr, follower.broker_id))

    def maybe_shrink_isr(self, now_ms: int) -> IsrChange | None:
        """Kafka's maybeShrinkIsr (run every replica.lag.time.max.ms / 2): followers of the ISR
        that were not caught up within replica.lag.time.max.ms leave it."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        leader_end = self.log.log_end_offset
        out_of_sync = {
            broker_id
            for broker_id in self.isr
            if broker_id != self.local_broker_id
            and (follower := self.followers.get(broker_id)) is not None
            and not follower.is_caught_up(leader_end, now_ms, self.replica_lag_time_max_ms)
        }
        if not out_of_sync:
            return None
        return self._propose(IsrChangeKind.SHRINK, tuple(b for b in self.isr if b not in out_of_sync))

    def _propose(self, kind: IsrChangeKind, new_isr: tuple[int, ...]) -> IsrChange:
        def epoch_of(broker_id: int) -> int:
            if broker_id == self.local_broker_id:
                return self.brokers.local_broker_epoch()
            follower = self.followers.get(broker_id)
            return follower.broker_epoch if follower is not None and follower.broker_epoch is not None else -1

        change = IsrChange(
            kind,
            self.topic,
            self.index,
            self.leader_epoch,
            self.partition_epoch,
            self.isr,
            tuple((b, epoch_of(b)) for b in new_isr),
        )
        self.pending_isr = change
        return change

    def isr_change_answered(
        self, change: IsrChange, error: ErrorCode, answer: LeaderAndIsr | None, now_ms: int
    ) -> bool:
        """The controller's answer to ``change`` (Kafka's handleAlterPartitionUpdate / Error);
        True when the high watermark moved. Ignored unless ``change`` is still the one in flight
        (a newer registration replaced it). Accepted: the answer's ISR and partition epoch are
        committed here at once. INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED: the controller
        applied nothing, so the committed ISR stands and a later change may be proposed. Other
        errors (stale epochs, unknown partition): the change stays pending until the metadata
        brings the partition's registration."""
        if self.pending_isr is not change:
            return False
        if error is ErrorCode.NONE and answer is not None:
            if answer.leader_epoch != self.leader_epoch or answer.partition_epoch < self.partition_epoch:
                return False
            self.pending_isr = None
            self.isr = answer.isr
            self.partition_epoch = answer.partition_epoch
            self.leader_recovery_state = answer.leader_recovery_state
            return self.maybe_increment_high_watermark(now_ms)
        if error in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED):
            self.pending_isr = None
        return False

    def check_min_isr_for_acks_all(self) -> None:
        """Kafka's appendRecordsToLeader check: an acks=all append is refused before it is
        written when the ISR is below the effective min.insync.replicas."""
        if len(self.isr) < self.effective_min_isr:
            raise PartitionError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR : {len(self.isr)} is insufficient to satisfy the min.isr "
                f"requirement of {self.effective_min_isr} for partition {self.topic}-{self.index}, "
                f"live replica(s) broker.id are : {list(self.isr)}",
            )

    def replicated_to(self, required_offset: int) -> ErrorCode | None:
        """Kafka's checkEnoughReplicasReachOffset for an acks=all append ending before
        ``required_offset``: None while the high watermark is below it; then NONE, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the maximal ISR fell below min.insync.replicas
        meanwhile; NOT_LEADER_OR_FOLLOWER once this replica no longer leads."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return None
        if self.effective_min_isr <= len(self.maximal_isr):
            return ErrorCode.NONE
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    # -- the follower's side -------------------------------------------------------------------

    def append_as_follower(
        self, records: bytes | memoryview, *, now_ms: int, syncs: Syncs, defer_roll: bool = False
    ) -> AppendResult:
        """The first step of a replicated append: the leader's batches as its fetch answer
        carried them, offsets and epochs kept (Kafka's appendRecordsToFollowerOrFutureReplica).
        Then ``complete_follower_append``. Raises the log's errors (nothing appended) and
        RollNeeded as ``append_as_leader`` does."""
        return self.log.append_as_follower(records, now_ms=now_ms, syncs=syncs, defer_roll=defer_roll)

    def complete_follower_append(self, result: AppendResult, error: OSError | None, now_ms: int) -> None:
        if result.flush is not None:
            self.log.complete_append(result, error, now_ms)
        self.notify_progress()

    def follow_log_start(self, leader_log_start: int, *, now_ms: int, syncs: Syncs) -> bool:
        """A follower moves its log start up to its leader's (the leader's DeleteRecords or
        retention) once its own high watermark has passed it (Kafka's follower
        maybeIncrementLogStartOffset); the segments wholly below it are deleted through
        ``syncs``. True when it moved."""
        if (
            self.is_leader
            or leader_log_start <= self.log.log_start_offset
            or leader_log_start > self.log.high_watermark
        ):
            return False
        self.log.delete_records_before(leader_log_start, now_ms=now_ms, syncs=syncs)
        self.notify_progress()
        return True

    def truncation_offset(self, leader_epoch: int, leader_end_offset: int) -> int:
        """Where a follower cuts its log on the leader's DivergingEpoch (Kafka's
        getOffsetTruncationState): the smaller of the leader's end offset for ``leader_epoch``
        and this log's end offset for the largest epoch it has at or below it; when this log
        does not have that epoch, its own end for the epoch below (the next fetch names the
        epoch the log then ends with, so a further divergence is found in the next round)."""
        local_end = self.log_end_offset
        if leader_epoch < 0:
            return max(min(leader_end_offset, local_end), 0)
        epoch, end_offset = self.end_offset_for_epoch(leader_epoch)
        if epoch < 0:
            offset = min(leader_end_offset, local_end)
        elif epoch != leader_epoch:
            offset = min(end_offset, local_end)
        else:
            offset = min(end_offset, leader_end_offset, local_end)
        return max(offset, 0)

    def truncate_to(self, offset: int, now_ms: int) -> bool:
        """A follower's log cut at ``offset`` (where it parts from the leader's); True when
        something was removed."""
        cut = self.log.truncate_to(offset, now_ms=now_ms)
        if cut:
            self.notify_progress()
        return cut

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """A follower whose log ends below the leader's log start starts again, empty, there."""
        self.log.truncate_fully_and_start_at(offset, now_ms=now_ms)
        self.notify_progress()

    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower learns the high watermark from each fetch response, clamped to its own log
        (it may be behind); True when it moved."""
        return self._set_high_watermark(min(leader_high_watermark, self.log.log_end_offset))

    def update_high_watermark(self, offset: int, now_ms: int) -> bool:
        """The coordinators' partitions bound the high watermark by what is durable here
        (``offset``; their records are answered only once flushed): it never passes it, and
        falls to it when a failed flush cut records. True when it moved."""
        self.durable_end = offset
        if offset < self.log.high_watermark:
            return self._set_high_watermark(offset)
        return self.maybe_increment_high_watermark(now_ms)

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
        if not self.maybe_increment_high_watermark(now_ms):
            self.notify_progress()  # followers' long-poll fetches wake for the new data (Kafka completes them)
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
        last_fetched_epoch: int = NO_EPOCH,
        fetch_only_from_leader: bool = True,
    ) -> PartitionRead:
        """Whole batches from ``fetch_offset``, at most ``max_bytes`` (the first whole when
        ``min_one_batch``), bounded by the isolation level. A follower's fetch (``replica_id`` a
        broker id) reads to the log end. A consumer that may read from a follower (KIP-392:
        ``fetch_only_from_leader`` false) reads here whether this replica leads or follows, up to
        this replica's high watermark or last stable offset. With ``last_fetched_epoch`` (Fetch
        v12+) a fetch whose log has parted from this one's gets the epoch and end offset to
        truncate by, and no records (Kafka's readRecords). Raises PartitionError (epoch,
        leadership) and the log's OffsetOutOfRange / OSError."""
        self.check_request(current_leader_epoch, require_leader=fetch_only_from_leader)
        if replica_id >= 0:
            isolation = Isolation.LOG_END
        log = self.log
        if (
            replica_id >= 0
            and fetch_offset == log.log_end_offset
            and last_fetched_epoch == log.epoch_cache.latest_epoch
        ):
            # A follower caught up in this leader's latest epoch (most fetches of most partitions):
            # it cannot have diverged, and there is nothing to read.
            end = log.log_end_offset
            return PartitionRead(
                [], 0, log.high_watermark, log.last_stable_offset, log.log_start_offset, None, None, end
            )
        if last_fetched_epoch >= 0:
            epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
            if epoch < 0 or end_offset < 0:
                # Kafka: "Could not determine the end offset of the last fetched epoch".
                raise OffsetOutOfRange(fetch_offset, log.log_start_offset, log.log_end_offset)
            # Only above the log start (KAFKA-12668): below it the follower starts again anyway.
            if (epoch < last_fetched_epoch or end_offset < fetch_offset) and fetch_offset >= log.log_start_offset:
                return PartitionRead(
                    [],
                    0,
                    log.high_watermark,
                    log.last_stable_offset,
                    log.log_start_offset,
                    [] if isolation is Isolation.TXN_COMMITTED else None,
                    DivergingEpoch(epoch, end_offset),
                    log.log_end_offset,
                )
        if isolation is Isolation.TXN_COMMITTED:
            limit = log.last_stable_offset
        elif isolation is Isolation.HIGH_WATERMARK:
            limit = log.high_watermark
        else:
            limit = log.log_end_offset
        log_end = log.log_end_offset
        result = log.read(fetch_offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)
        aborted = log.aborted_transactions(fetch_offset, result) if isolation is Isolation.TXN_COMMITTED else None
        return PartitionRead(
            result.ranges,
            result.size,
            result.high_watermark,
            result.last_stable_offset,
            result.log_start_offset,
            aborted,
            None,
            log_end,
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
        self.log.delete_records_before(target, now_ms=now_ms, syncs=syncs)
        self.notify_progress()
        return self.low_watermark

    @property
    def low_watermark(self) -> int:
        """Kafka's lowWatermarkIfLeader: the smallest log start over this replica and its alive
        followers' (as their last fetch gave it; -1 for one that has not fetched from this
        leader yet). A DeleteRecords is answered once it reached the requested offset."""
        low = self.log_start_offset
        for follower in self.followers.values():
            if follower.log_start_offset < low and self.brokers.is_alive(follower.broker_id):
                low = follower.log_start_offset
        return low

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
        if isolation is Isolation.TXN_COMMITTED:
            fetchable = log.last_stable_offset
        elif isolation is Isolation.LOG_END:  # a replica's request: everything this leader has
            fetchable = log.log_end_offset
        else:
            fetchable = log.high_watermark
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
