"""The transaction coordinator: a synchronous state machine (Kafka's TransactionCoordinator and
TransactionStateManager, without threads).

Rules:

- Every call takes ``now_ms``; nothing here reads a clock. ``poll(now_ms)`` aborts timed-out
  transactions, expires idle transactional ids, retries what failed, and returns the next
  deadline, so a thin adapter can sleep until then.
- Each state change is prepared, written through the ``TxnStore`` into ``__transaction_state``
  (durable before the call returns, so before any response), then applied; a failed write
  changes nothing. ``replay`` rebuilds the state from those records at start-up, and
  ``on_loaded`` finishes every transaction found half-way (PrepareCommit / PrepareAbort) by
  writing its markers again: a transaction ends whole or not at all.
- Ending a transaction writes PrepareCommit/PrepareAbort, then hands ``MarkerJob``s to the
  adapter (``take_marker_jobs``), which writes the markers through WriteTxnMarkers and reports
  back (``on_markers_written``). Once every partition has its marker, CompleteCommit /
  CompleteAbort is written. Until then the id answers CONCURRENT_TRANSACTIONS.
- Producer ids come from the ``allocate_producer_id`` callable (the controller's persisted
  blocks), so none is reused after a restart; when it raises ProducerIdUnavailable (no block
  has an id left yet) its code is InitProducerId's answer, as Kafka's coordinator answers.

Only transactions v1 run here: the epoch changes on InitProducerId and when a producer is fenced
(a new instance, or its transaction timed out), never on EndTxn.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from kafkalike.protocol.errors import ErrorCode
from kafkalike.txn.api import DescribedTxn, InitResult, ListedTxn, ListResult, MarkerJob, ProducerIdUnavailable
from kafkalike.txn.config import TxnConfig
from kafkalike.txn.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    TxnTransit,
    from_record,
    is_epoch_exhausted,
)
from kafkalike.txn.records import (
    LoadedTxn,
    RecordError,
    TxnRecord,
    decode_record,
    partition_for,
    state_record,
    tombstone,
)
from kafkalike.txn.state import TxnState
from kafkalike.txn.store import StoreError, TxnStore

log = logging.getLogger("kafkalike.txn")
E = ErrorCode
S = TxnState

# Marker errors after which the partition no longer waits for its marker: written, the
# partition is gone, or a newer producer epoch / coordinator already ended it there.
MARKER_DONE = frozenset(
    {
        E.NONE,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.INVALID_PRODUCER_EPOCH,
        E.TRANSACTION_COORDINATOR_FENCED,
        E.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        E.UNSUPPORTED_VERSION,
    }
)


@dataclass
class _Completion:
    """A transaction whose markers are being written, and the record that will end it."""

    commit: bool
    transit: TxnTransit
    retry_at_ms: int | None = None  # the Complete record failed to write: try again then


class TransactionCoordinator:
    def __init__(
        self,
        config: TxnConfig,
        store: TxnStore,
        allocate_producer_id: Callable[[], int],
        *,
        coordinator_epoch: int = 0,
    ) -> None:
        self.config = config
        self.store = store
        self.allocate_producer_id = allocate_producer_id
        self.coordinator_epoch = coordinator_epoch
        self.txns: dict[str, TxnMetadata] = {}
        self._completions: dict[str, _Completion] = {}
        self._outbox: list[MarkerJob] = []
        self._marker_retries: list[tuple[int, MarkerJob]] = []
        self._next_abort_check_ms: int | None = None
        self._next_expiry_ms: int | None = None

    # -- plumbing -------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.state_log_partitions)

    def _write(self, transactional_id: str, records: list[TxnRecord], now_ms: int) -> ErrorCode | None:
        try:
            self.store.append(self.partition_for(transactional_id), records, now_ms)
        except StoreError as exc:
            # A disk error was logged where it happened (once, not per request); Kafka answers it NOT_COORDINATOR.
            log.log(
                logging.DEBUG if exc.storage else logging.WARNING,
                "transactional id %s: cannot persist its state: %s",
                transactional_id,
                exc,
            )
            if exc.storage:
                return E.NOT_COORDINATOR
            return E.UNKNOWN_SERVER_ERROR if exc.too_large else E.COORDINATOR_NOT_AVAILABLE
        return None

    def _apply(self, txn: TxnMetadata, transit: TxnTransit, now_ms: int) -> ErrorCode | None:
        """Write a prepared transit and apply it; on failure abandon it and return the error."""
        error = self._write(txn.transactional_id, [state_record(txn.transactional_id, transit)], now_ms)
        if error is not None:
            txn.abandon_transition()
            return error
        txn.complete_transition(transit)
        return None

    def _valid_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.max_timeout_ms

    # -- InitProducerId -------------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int, now_ms: int
    ) -> InitResult:
        """A producer id and epoch for ``transactional_id``: a new id, the next epoch, or (when the
        previous instance left a transaction open) CONCURRENT_TRANSACTIONS while that
        transaction is aborted and the old instance fenced; the client retries."""
        if not transactional_id:
            return InitResult(E.INVALID_REQUEST)
        if not self._valid_timeout(timeout_ms):
            return InitResult(E.INVALID_TRANSACTION_TIMEOUT)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InitResult(E.INVALID_REQUEST)
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        txn = self.txns.get(transactional_id)
        if txn is None:
            try:
                new_id = self.allocate_producer_id()
            except ProducerIdUnavailable as exc:  # Kafka: the manager's error is the answer
                return InitResult(exc.code)
            txn = TxnMetadata(transactional_id, new_id, timeout_ms=timeout_ms, last_update_ms=now_ms)
            self.txns[transactional_id] = txn
        if txn.pending:
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _may_continue(txn, *expected):
            return InitResult(E.PRODUCER_FENCED)
        if txn.state.is_preparing:
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        if txn.state is S.ONGOING:
            fence = txn.prepare_fence_epoch()
            error = self._end(txn, fence.producer_id, fence.producer_epoch, False, False, now_ms)
            return InitResult(E.CONCURRENT_TRANSACTIONS if error is E.NONE else error)
        expected_epoch = None if expected is None else expected[1]
        if txn.epoch_exhausted and (expected_epoch is None or expected_epoch == txn.producer_epoch):
            try:
                new_id = self.allocate_producer_id()
            except ProducerIdUnavailable as exc:
                return InitResult(exc.code)
            transit: TxnTransit | None = txn.prepare_rotate_producer_id(
                new_id, timeout_ms, now_ms, expected is not None
            )
        else:
            transit = txn.prepare_increment_epoch(timeout_ms, expected_epoch, now_ms)
        if transit is None:
            return InitResult(E.PRODUCER_FENCED)
        failed = self._apply(txn, transit, now_ms)
        if failed is not None:
            return InitResult(failed)
        log.debug(
            "initialized transactional id %s with producer id %d epoch %d",
            transactional_id,
            transit.producer_id,
            transit.producer_epoch,
        )
        return InitResult(E.NONE, transit.producer_id, transit.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------

    def _check_producer(self, txn: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        if txn is None or txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if txn.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return None

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> ErrorCode:
        if not transactional_id:
            return E.INVALID_REQUEST
        txn = self.txns.get(transactional_id)
        error = self._check_producer(txn, producer_id, producer_epoch)
        if error is not None:
            return error
        assert txn is not None
        if txn.pending or txn.state.is_preparing:
            return E.CONCURRENT_TRANSACTIONS
        added = frozenset(partitions)
        if txn.state is S.ONGOING and added <= txn.partitions:
            return E.NONE
        return self._apply(txn, txn.prepare_add_partitions(added, now_ms), now_ms) or E.NONE

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Whether each partition is part of the ongoing transaction (KIP-890 part 1): what a
        partition leader asks before accepting a producer's first transactional batch there."""
        wanted = list(partitions)
        if not transactional_id:
            return dict.fromkeys(wanted, E.INVALID_REQUEST)
        txn = self.txns.get(transactional_id)
        error = self._check_producer(txn, producer_id, producer_epoch)
        if error is None and txn is not None and txn.state.is_preparing:
            error = E.CONCURRENT_TRANSACTIONS
        if error is not None or txn is None:
            return dict.fromkeys(wanted, error or E.INVALID_PRODUCER_ID_MAPPING)
        return {tp: E.NONE if tp in txn.partitions else E.TRANSACTION_ABORTABLE for tp in wanted}

    # -- EndTxn ---------------------------------------------------------------------------------

    def end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
    ) -> ErrorCode:
        """EndTxn: PrepareCommit / PrepareAbort is durable when this returns NONE; the markers
        follow through ``take_marker_jobs``. A retry of a finished end answers NONE."""
        if not transactional_id:
            return E.INVALID_REQUEST
        txn = self.txns.get(transactional_id)
        if txn is None:
            return E.INVALID_PRODUCER_ID_MAPPING
        return self._end(txn, producer_id, producer_epoch, commit, True, now_ms)

    def _end(
        self, txn: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool, from_client: bool, now_ms: int
    ) -> ErrorCode:
        error = self._end_checked(txn, producer_id, producer_epoch, commit, from_client, now_ms)
        if txn.pending_state is S.PREPARE_EPOCH_FENCE:  # a fence that did not turn into an abort
            txn.abandon_transition()
        return error

    def _end_checked(
        self, txn: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool, from_client: bool, now_ms: int
    ) -> ErrorCode:
        if txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        valid_epoch = (not from_client or producer_epoch == txn.producer_epoch) and producer_epoch >= txn.producer_epoch
        if not valid_epoch:
            return E.PRODUCER_FENCED
        fencing = txn.pending_state is S.PREPARE_EPOCH_FENCE
        if txn.pending and not fencing:
            return E.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state is S.ONGOING:
            if fencing:
                # The fence becomes an abort at the bumped epoch: clear it and adopt the epoch.
                txn.pending_state = None
                txn.producer_epoch = producer_epoch
                txn.last_producer_epoch = NO_PRODUCER_EPOCH
            error = self._write_end(txn, commit, now_ms)
            if error is not None:
                if fencing:
                    txn.has_failed_epoch_fence = True
                return error
            return E.NONE
        if state is S.COMPLETE_COMMIT or state is S.COMPLETE_ABORT:
            return E.NONE if commit == (state is S.COMPLETE_COMMIT) else E.INVALID_TXN_STATE
        if state.is_preparing:
            return E.CONCURRENT_TRANSACTIONS if commit == (state is S.PREPARE_COMMIT) else E.INVALID_TXN_STATE
        return E.INVALID_TXN_STATE

    def _write_end(self, txn: TxnMetadata, commit: bool, now_ms: int) -> ErrorCode | None:
        error = self._apply(txn, txn.prepare_end(commit, now_ms), now_ms)
        if error is None:
            log.debug(
                "%s transaction of %s (producer %d epoch %d) on %d partition(s)",
                "committing" if commit else "aborting",
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                len(txn.partitions),
            )
            self._start_markers(txn, commit, now_ms)
        return error

    # -- markers --------------------------------------------------------------------------------

    def _start_markers(self, txn: TxnMetadata, commit: bool, now_ms: int) -> None:
        self._completions[txn.transactional_id] = _Completion(commit, txn.prepare_complete(now_ms))
        if txn.partitions:
            self._outbox.append(self._job(txn, commit, frozenset(txn.partitions)))
        else:
            self._maybe_complete(txn.transactional_id, now_ms)

    def _job(self, txn: TxnMetadata, commit: bool, partitions: frozenset[TopicPartition]) -> MarkerJob:
        return MarkerJob(
            txn.transactional_id, txn.producer_id, txn.producer_epoch, self.coordinator_epoch, commit, partitions
        )

    def take_marker_jobs(self) -> list[MarkerJob]:
        """The markers to write now, oldest first (the adapter sends them, then reports back)."""
        jobs, self._outbox = self._outbox, []
        return jobs

    def on_markers_written(self, job: MarkerJob, errors: Mapping[TopicPartition, ErrorCode], now_ms: int) -> None:
        """The answer to a ``MarkerJob``: written partitions stop waiting, retriable failures are
        tried again after ``retry_backoff_ms``; with every marker in, the transaction completes."""
        txn = self.txns.get(job.transactional_id)
        completion = self._completions.get(job.transactional_id)
        if txn is None or completion is None or txn.producer_id != job.producer_id or not txn.state.is_preparing:
            log.info("dropping the answer to stale markers of %s", job.transactional_id)
            return
        retry = []
        for tp in job.partitions:
            error = errors.get(tp, E.REQUEST_TIMED_OUT)
            if error in MARKER_DONE:
                if error is not E.NONE:
                    log.info("marker of %s for %s-%d not needed: %s", txn.transactional_id, *tp, error.name)
                txn.remove_partition(tp)
            else:
                log.info("marker of %s for %s-%d failed (%s), will retry", txn.transactional_id, *tp, error.name)
                retry.append(tp)
        if retry:
            self._marker_retries.append(
                (now_ms + self.config.retry_backoff_ms, replace(job, partitions=frozenset(retry)))
            )
        self._maybe_complete(job.transactional_id, now_ms)

    def _maybe_complete(self, transactional_id: str, now_ms: int) -> None:
        txn = self.txns[transactional_id]
        completion = self._completions[transactional_id]
        if txn.partitions:
            return
        transit = completion.transit
        error = self._write(transactional_id, [state_record(transactional_id, transit)], now_ms)
        if error is not None:
            completion.retry_at_ms = now_ms + self.config.retry_backoff_ms  # pending state stays
            return
        txn.complete_transition(transit)
        del self._completions[transactional_id]
        log.debug("%s transaction of %s", "committed" if completion.commit else "aborted", transactional_id)

    # -- time -----------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> int | None:
        """Run what is due; the next deadline in ms, or None when nothing is scheduled."""
        if self._next_abort_check_ms is not None and now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + self.config.abort_timed_out_interval_ms
            self.abort_timed_out(now_ms)
        if self._next_expiry_ms is not None and now_ms >= self._next_expiry_ms:
            self._next_expiry_ms = now_ms + self.config.remove_expired_interval_ms
            self.remove_expired(now_ms)
        due = [job for at, job in self._marker_retries if at <= now_ms]
        if due:
            self._marker_retries = [(at, job) for at, job in self._marker_retries if at > now_ms]
            self._outbox += due
        for transactional_id, completion in list(self._completions.items()):
            if completion.retry_at_ms is not None and completion.retry_at_ms <= now_ms:
                completion.retry_at_ms = None
                self._maybe_complete(transactional_id, now_ms)
        deadlines = [at for at, _ in self._marker_retries]
        deadlines += [c.retry_at_ms for c in self._completions.values() if c.retry_at_ms is not None]
        deadlines += [d for d in (self._next_abort_check_ms, self._next_expiry_ms) if d is not None]
        if self._outbox:
            deadlines.append(now_ms)
        return min(deadlines) if deadlines else None

    def abort_timed_out(self, now_ms: int) -> int:
        """Abort every transaction open longer than its timeout, fencing its producer (Kafka's
        abortTimedOutTransactions); returns how many were started."""
        started = 0
        for txn in list(self.txns.values()):
            if txn.state is not S.ONGOING or txn.pending or txn.start_ms + txn.timeout_ms >= now_ms:
                continue
            fence = txn.prepare_fence_epoch()
            error = self._end(txn, fence.producer_id, fence.producer_epoch, False, False, now_ms)
            if error is E.NONE:
                started += 1
                log.info("aborting the timed-out transaction of %s", txn.transactional_id)
            else:
                log.warning("cannot abort the timed-out transaction of %s: %s", txn.transactional_id, error.name)
        return started

    def remove_expired(self, now_ms: int) -> int:
        """Forget transactional ids idle for transactional.id.expiration.ms (a tombstone each)."""
        by_partition: dict[int, list[TxnMetadata]] = defaultdict(list)
        for txn in self.txns.values():
            idle = txn.last_update_ms <= now_ms - self.config.id_expiration_ms
            if txn.state.expiration_allowed and not txn.pending and idle:
                by_partition[self.partition_for(txn.transactional_id)].append(txn)
        removed = 0
        for partition, txns in by_partition.items():
            try:
                self.store.append(partition, [tombstone(t.transactional_id) for t in txns], now_ms)
            except StoreError as exc:
                log.warning("cannot expire %d transactional id(s): %s", len(txns), exc)
                continue
            for txn in txns:
                del self.txns[txn.transactional_id]
            removed += len(txns)
        if removed:
            log.info("expired %d transactional id(s)", removed)
        return removed

    # -- admin ----------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> DescribedTxn:
        if not transactional_id:
            return DescribedTxn(transactional_id, E.INVALID_REQUEST)
        txn = self.txns.get(transactional_id)
        if txn is None or txn.state is S.DEAD:
            return DescribedTxn(transactional_id, E.TRANSACTIONAL_ID_NOT_FOUND)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(txn.partitions):
            by_topic[topic].append(partition)
        return DescribedTxn(
            transactional_id,
            E.NONE,
            state=txn.state.display_name,
            timeout_ms=txn.timeout_ms,
            start_ms=txn.start_ms,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            topics=tuple((t, tuple(ps)) for t, ps in by_topic.items()),
        )

    def list_transactions(
        self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int, now_ms: int
    ) -> ListResult:
        """ListTransactions' filters: state names (unknown ones reported back), producer ids,
        and (v1) only transactions running longer than ``duration_ms`` when it is >= 0."""
        names = list(states)
        wanted = {s for n in names if (s := TxnState.from_name(n)) is not None}
        unknown = tuple(n for n in names if TxnState.from_name(n) is None)
        pids = set(producer_ids)
        out = []
        for txn in self.txns.values():
            if txn.state is S.DEAD or (pids and txn.producer_id not in pids) or (names and txn.state not in wanted):
                continue
            if duration_ms >= 0 and now_ms - txn.start_ms <= duration_ms:
                continue
            out.append(ListedTxn(txn.transactional_id, txn.producer_id, txn.state.display_name))
        return ListResult(E.NONE, unknown, tuple(out))

    # -- loading --------------------------------------------------------------------------------

    def replay(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of ``__transaction_state``, read back in log order at start-up."""
        try:
            loaded = decode_record(key, value)
        except RecordError as exc:
            log.warning("skipping an unreadable record in the transaction state topic: %s", exc)
            return
        self.replay_decoded(loaded)

    def replay_decoded(self, loaded: LoadedTxn | None) -> None:
        """``replay`` of a record already decoded (``decode_record``, where the log was read)."""
        if loaded is None:
            return
        if loaded.transit is None:
            self.txns.pop(loaded.transactional_id, None)
        else:
            self.txns[loaded.transactional_id] = from_record(loaded.transactional_id, loaded.transit)

    def unload_partition(self, partition: int) -> None:
        """Forget every transactional id of a state-topic partition, as Kafka unloads a
        coordinator partition whose log write failed (``load_partition`` then replays its log):
        their state, their markers waiting to go out and the completions they wait for."""

        def here(transactional_id: str) -> bool:
            return self.partition_for(transactional_id) == partition

        for transactional_id in [t for t in self.txns if here(t)]:
            del self.txns[transactional_id]
            self._completions.pop(transactional_id, None)
        self._outbox = [job for job in self._outbox if not here(job.transactional_id)]
        self._marker_retries = [(at, job) for at, job in self._marker_retries if not here(job.transactional_id)]

    def load_partition(self, records: Iterable[tuple[bytes | None, bytes | None]], now_ms: int) -> None:
        """After ``unload_partition``: the partition's records replayed, and its transactions
        found half-way completed, as ``on_loaded`` completes them."""
        before = set(self.txns)
        for key, value in records:
            self.replay(key, value)
        for transactional_id in set(self.txns) - before:
            txn = self.txns[transactional_id]
            if txn.state.is_preparing:
                self._start_markers(txn, txn.state is S.PREPARE_COMMIT, now_ms)

    def on_loaded(self, now_ms: int) -> None:
        """After the replay: finish every transaction left half-way, start the periodic jobs."""
        unfinished = 0
        for txn in self.txns.values():
            if txn.state.is_preparing:
                unfinished += 1
                log.info(
                    "completing the %s of %s left by the previous run", txn.state.display_name, txn.transactional_id
                )
                self._start_markers(txn, txn.state is S.PREPARE_COMMIT, now_ms)
        self._next_abort_check_ms = now_ms + self.config.abort_timed_out_interval_ms
        self._next_expiry_ms = now_ms + self.config.remove_expired_interval_ms
        if self.txns:
            log.info("loaded %d transactional id(s), %d to complete", len(self.txns), unfinished)


def _may_continue(txn: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
    """InitProducerId with the producer's current id and epoch (KIP-360): allowed for a fresh id,
    the current producer id, or the previous one right after its epochs ran out (a retry)."""
    return (
        txn.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == txn.producer_id
        or (producer_id == txn.prev_producer_id and is_epoch_exhausted(producer_epoch))
    )
