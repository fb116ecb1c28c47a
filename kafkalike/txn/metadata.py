"""One transactional id's state and its two-step transitions (Kafka's TransactionMetadata).

A change is prepared first (``prepare_*`` returns the target ``TxnTransit`` and sets
``pending_state``), the transit is written to ``__transaction_state``, and only then applied
(``complete_transition``). While a transition is pending, other requests for the id get
CONCURRENT_TRANSACTIONS; a failed write clears the pending state and changes nothing.

This broker runs transactions v1 only (KIP-890 part 2 is not advertised), so an EndTxn never
bumps the epoch and ``next_producer_id`` stays -1; the epoch moves only on InitProducerId and
on fencing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kafkalike.txn.state import VALID_PREVIOUS_STATES, IllegalTransition, TxnState

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767

TopicPartition = tuple[str, int]


def is_epoch_exhausted(epoch: int) -> bool:
    """No epoch may reach Short.MAX_VALUE, so the coordinator can always fence once more."""
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransit:
    """The target of a transition: what the TransactionLogValue record holds."""

    producer_id: int
    prev_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending_state: TxnState | None = None
    # An epoch fence whose PrepareAbort could not be written: the bumped epoch stays in memory
    # (it was never returned to anyone) and the next fence does not bump it again.
    has_failed_epoch_fence: bool = False

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_open_transaction(self) -> bool:
        return self.state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    def snapshot(self) -> TxnTransit:
        """The current state as a transit (what a record written now would hold)."""
        return TxnTransit(
            self.producer_id,
            self.prev_producer_id,
            self.next_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.start_ms,
            self.last_update_ms,
        )

    # ---- preparing ------------------------------------------------------------------------

    def _prepare(self, target: TxnTransit) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: to {target.state} while {self.pending_state} is pending")
        if target.producer_id < 0:
            raise IllegalTransition(f"{self.transactional_id}: producer id {target.producer_id}")
        if target.state is not TxnState.DEAD and target.producer_epoch < 0:
            raise IllegalTransition(f"{self.transactional_id}: producer epoch {target.producer_epoch}")
        if self.state not in VALID_PREVIOUS_STATES[target.state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state} -> {target.state}")
        self.pending_state = target.state
        return target

    def prepare_fence_epoch(self) -> TxnTransit:
        """Ongoing -> PrepareEpochFence with the epoch bumped (once, even if retried)."""
        if self.producer_epoch >= SHORT_MAX:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence epoch {self.producer_epoch}")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        base = self.snapshot()
        return self._prepare(
            replace(
                base, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH, state=TxnState.PREPARE_EPOCH_FENCE
            )
        )

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> TxnTransit | None:
        """InitProducerId on an idle id: the next epoch, or None when ``expected_epoch`` is fenced.

        Without an expected epoch the epoch is simply bumped. With one (KIP-360): if it is the
        current epoch (or there is none yet) the epoch is bumped and the old one remembered; if it
        is the previous epoch this is a retry of a bump that succeeded, answered unchanged.
        """
        if self.epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: epochs of producer {self.producer_id} are exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(
            replace(
                self.snapshot(),
                producer_epoch=epoch,
                last_producer_epoch=last,
                timeout_ms=timeout_ms,
                state=TxnState.EMPTY,
                partitions=frozenset(),
                start_ms=-1,
                last_update_ms=now_ms,
            )
        )

    def prepare_rotate_producer_id(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """InitProducerId once the epochs ran out: a new producer id at epoch 0."""
        if self.has_open_transaction:
            raise IllegalTransition(f"{self.transactional_id}: producer id rotation with an open transaction")
        return self._prepare(
            TxnTransit(
                producer_id=new_producer_id,
                prev_producer_id=self.producer_id,
                next_producer_id=NO_PRODUCER_ID,
                producer_epoch=0,
                last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms,
                state=TxnState.EMPTY,
                partitions=frozenset(),
                start_ms=-1,
                last_update_ms=now_ms,
            )
        )

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        starting = self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        return self._prepare(
            replace(
                self.snapshot(),
                state=TxnState.ONGOING,
                partitions=frozenset(self.partitions | added),
                start_ms=now_ms if starting else self.start_ms,
                last_update_ms=now_ms,
            )
        )

    def prepare_end(self, commit: bool, now_ms: int) -> TxnTransit:
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        return self._prepare(replace(self.snapshot(), state=state, last_update_ms=now_ms))

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """PrepareCommit -> CompleteCommit (PrepareAbort -> CompleteAbort) once every marker is in."""
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(
            replace(
                self.snapshot(),
                next_producer_id=NO_PRODUCER_ID,
                last_producer_epoch=self.producer_epoch,
                state=state,
                partitions=frozenset(),
                last_update_ms=now_ms,
            )
        )

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(replace(self.snapshot(), state=TxnState.DEAD, partitions=frozenset()))

    # ---- completing -----------------------------------------------------------------------

    def abandon_transition(self) -> None:
        """The record could not be written: nothing changes."""
        self.pending_state = None

    def complete_transition(self, target: TxnTransit) -> None:
        """Apply a transit once its record is durable (Kafka's completeTransitionTo checks)."""
        if self.pending_state is not target.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {target.state}, pending {self.pending_state}")
        to = target.state
        if to is TxnState.EMPTY:
            bumped = target.producer_epoch == self.producer_epoch + 1 or (
                target.producer_epoch == 0 and target.producer_id != self.producer_id
            )
            if (target.producer_epoch != self.producer_epoch and not bumped) or target.partitions:
                raise IllegalTransition(f"{self.transactional_id}: bad InitProducerId transit {target}")
            self.timeout_ms = target.timeout_ms
            self.producer_epoch = target.producer_epoch
            self.last_producer_epoch = target.last_producer_epoch
            self.producer_id = target.producer_id
            self.prev_producer_id = target.prev_producer_id
            self.start_ms = -1
        elif to is TxnState.ONGOING:
            if not self._same_producer(target) or not self.partitions <= target.partitions:
                raise IllegalTransition(f"{self.transactional_id}: bad AddPartitions transit {target}")
            self.start_ms = target.start_ms
            self.partitions |= target.partitions
        elif to in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if not self._same_producer(target) or self.partitions != set(target.partitions):
                raise IllegalTransition(f"{self.transactional_id}: bad EndTxn transit {target}")
        elif to in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if not self._same_producer(target) or target.start_ms == -1:
                raise IllegalTransition(f"{self.transactional_id}: bad completion transit {target}")
            self.partitions.clear()
        else:  # PrepareEpochFence and Dead are never applied: they end as PrepareAbort or removal
            raise IllegalTransition(f"{self.transactional_id}: cannot complete a transition to {to}")
        self.last_update_ms = target.last_update_ms
        self.pending_state = None
        self.state = to

    def _same_producer(self, target: TxnTransit) -> bool:
        return target.producer_id == self.producer_id and target.producer_epoch == self.producer_epoch

    def remove_partition(self, partition: TopicPartition) -> None:
        """A marker is in: the partition no longer waits for one."""
        if not self.state.is_preparing:
            raise IllegalTransition(f"{self.transactional_id}: removing a partition in {self.state}")
        self.partitions.discard(partition)


def from_record(transactional_id: str, transit: TxnTransit) -> TxnMetadata:
    """The metadata a replayed TransactionLogValue describes (the last epoch is not stored)."""
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=transit.producer_id,
        prev_producer_id=transit.prev_producer_id,
        next_producer_id=transit.next_producer_id,
        producer_epoch=transit.producer_epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        timeout_ms=transit.timeout_ms,
        state=transit.state,
        partitions=set() if transit.state is TxnState.EMPTY else set(transit.partitions),
        start_ms=transit.start_ms,
        last_update_ms=transit.last_update_ms,
    )
