"""The trio adapter around the pure transaction coordinator (kafkalike.txn), and the marker path.

Rules:

- The coordinator is only touched in synchronous code between awaits, by handlers and by one
  timer task; the clock is read here (``now_ms()``) and passed in.
- After every coordinator call the timer task is woken: it writes the markers the call asked
  for, through ``write_markers`` (the same function the WriteTxnMarkers handler serves, so a
  marker takes the path it would take from a coordinator on another broker). As in Kafka, EndTxn
  is answered once PrepareCommit / PrepareAbort is durable, and the markers follow; the id
  answers CONCURRENT_TRANSACTIONS until they are all written.
- The timer task sleeps until the coordinator's next deadline (timed-out transactions,
  transactional id expiry, retries) or until woken, then polls and writes markers.
- The coordinator's records go to ``__transaction_state``, created on first use with
  ``transaction.state.log.num.partitions`` compacted partitions; each append is flushed before
  the call returns. At start-up the topic is read back and replayed, and every transaction
  found in PrepareCommit / PrepareAbort is completed before the broker serves anything.
- A marker appended to a ``__consumer_offsets`` partition also ends the producer's pending
  transactional offsets there (``kafkalike.group.txn_offsets``); partitions that got markers
  are flushed before the coordinator records the transaction complete.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from kafkalike.controller.metadata import ControllerError
from kafkalike.group import OFFSETS_TOPIC
from kafkalike.group.txn_offsets import (
    LogTxnOffsetWriter,
    TxnCommitRequest,
    TxnWriteError,
    commit_transactional_offsets,
    complete_transaction,
    replay_transactional_offsets,
)
from kafkalike.log import AppendOrigin, LogError, PartitionLog
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import build_end_txn_marker
from kafkalike.txn import (
    TRANSACTION_STATE_TOPIC,
    DescribedTxn,
    InitResult,
    ListResult,
    LogTxnStore,
    StoreError,
    TopicPartition,
    TransactionCoordinator,
    TxnConfig,
    read_records,
)

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker

log = logging.getLogger("kafkalike.transactions")
E = ErrorCode
COORDINATOR_EPOCH = 0  # the leader epoch of __transaction_state's partitions on a single node


def now_ms() -> int:
    return int(time.time() * 1000)


def txn_config(broker: Broker) -> TxnConfig:
    config = broker.config
    existing = broker.controller.image.topics.get(TRANSACTION_STATE_TOPIC)
    return TxnConfig(
        max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
        abort_timed_out_interval_ms=config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
        remove_expired_interval_ms=config.get_int("transaction.remove.expired.transaction.cleanup.interval.ms"),
        # An existing topic keeps its partition count: transactional ids must not move.
        state_log_partitions=existing.partitions
        if existing
        else config.get_int("transaction.state.log.num.partitions"),
    )


# -- markers: what WriteTxnMarkers does, for the handler and for this coordinator -------------


@dataclass(frozen=True)
class MarkerEntry:
    """One WritableTxnMarker of a WriteTxnMarkers request."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


def write_markers(broker: Broker, markers: Sequence[MarkerEntry]) -> list[dict[TopicPartition, ErrorCode]]:
    """Append each marker to each of its partitions (as the partition leader does); the error
    per partition, per marker. Every partition that got a marker is flushed before returning."""
    now = now_ms()
    touched: dict[TopicPartition, PartitionLog] = {}
    results = []
    for marker in markers:
        errors = {}
        for tp in marker.partitions:
            errors[tp] = _write_marker(broker, marker, tp, now, touched)
        results.append(errors)
    for tp, plog in touched.items():
        try:
            plog.flush(now)
        except (LogError, OSError) as exc:
            log.warning("cannot flush the marker of %s-%d: %s", *tp, exc)
            for errors in results:
                if errors.get(tp) is E.NONE:
                    errors[tp] = E.KAFKA_STORAGE_ERROR
    return results


def _write_marker(
    broker: Broker, marker: MarkerEntry, tp: TopicPartition, now: int, touched: dict[TopicPartition, PartitionLog]
) -> ErrorCode:
    state = broker.partitions.get(tp)
    if state is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if broker.faults.is_paused(*tp):
        return E.NOT_LEADER_OR_FOLLOWER
    batch = build_end_txn_marker(
        commit=marker.commit,
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch,
        timestamp=now,
    )
    try:
        state.log.append(bytearray(batch), leader_epoch=state.leader_epoch, now_ms=now, origin=AppendOrigin.COORDINATOR)
    except LogError as exc:
        log.info("marker of producer %d refused by %s-%d: %s", marker.producer_id, *tp, exc)
        return ErrorCode(exc.error_code)
    except OSError as exc:
        log.warning("cannot write a marker to %s-%d: %s", *tp, exc)
        return E.KAFKA_STORAGE_ERROR
    touched[tp] = state.log
    state.log.high_watermark = state.log.log_end_offset
    state.notify()
    if tp[0] == OFFSETS_TOPIC:
        complete_transaction(broker.groups.coordinator, tp[1], marker.producer_id, marker.commit, now)
    return E.NONE


# -- the service ------------------------------------------------------------------------------


class TxnService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._coordinator: TransactionCoordinator | None = None
        self._wakeup = trio.Event()
        self._offsets_writer = LogTxnOffsetWriter(self._offsets_log, on_append=self._offsets_appended)

    @property
    def coordinator(self) -> TransactionCoordinator:
        assert self._coordinator is not None, "TxnService.open() first"
        return self._coordinator

    # -- start-up and storage ---------------------------------------------------------------

    def open(self) -> None:
        """Replay the transactional offset commits (the group coordinator is open by now) and
        ``__transaction_state``, then finish what the previous run left half-way."""
        start = now_ms()
        offsets = self.broker.controller.image.topics.get(OFFSETS_TOPIC)
        pending = 0
        for partition in range(offsets.partitions if offsets else 0):
            state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
            if state is not None:
                pending += replay_transactional_offsets(self.broker.groups.coordinator, state.log, start)
        store = LogTxnStore(self._state_log, on_append=self._state_appended)
        self._coordinator = TransactionCoordinator(
            txn_config(self.broker),
            store,
            self.broker.controller.allocate_producer_id,
            coordinator_epoch=COORDINATOR_EPOCH,
        )
        topic = self.broker.controller.image.topics.get(TRANSACTION_STATE_TOPIC)
        records = 0
        for partition in range(topic.partitions if topic else 0):
            state = self.broker.partitions.get((TRANSACTION_STATE_TOPIC, partition))
            if state is None:
                continue
            for key, value in read_records(state.log):
                self.coordinator.replay(key, value)
                records += 1
        self.coordinator.on_loaded(now_ms())
        self._send_markers()
        if records or pending:
            log.info(
                "replayed %d record(s) of %s and %d transactional offset commit(s) in %d ms",
                records,
                TRANSACTION_STATE_TOPIC,
                pending,
                now_ms() - start,
            )

    def _ensure_topic(self, name: str, partitions: int, segment_bytes_config: str, compression: str) -> None:
        if name in self.broker.controller.image.topics:
            return
        configs = {
            "cleanup.policy": "compact",
            "compression.type": compression,
            "segment.bytes": self.broker.config.get(segment_bytes_config) or "104857600",
        }
        try:
            self.broker.create_topic(name, partitions, configs)
        except ControllerError as exc:
            if exc.code != E.TOPIC_ALREADY_EXISTS:
                raise
        log.info("created %s", name)

    def _state_log(self, partition: int) -> tuple[PartitionLog, int]:
        try:
            self._ensure_topic(
                TRANSACTION_STATE_TOPIC,
                self.coordinator.config.state_log_partitions,
                "transaction.state.log.segment.bytes",
                "uncompressed",
            )
        except ControllerError as exc:
            raise StoreError(f"cannot create {TRANSACTION_STATE_TOPIC}: {exc}") from exc
        state = self.broker.partitions.get((TRANSACTION_STATE_TOPIC, partition))
        if state is None:
            raise StoreError(f"{TRANSACTION_STATE_TOPIC}-{partition} is not hosted here")
        return state.log, state.leader_epoch

    def _offsets_log(self, partition: int) -> tuple[PartitionLog, int]:
        try:
            self.broker.groups.ensure_offsets_topic()
        except ControllerError as exc:
            raise TxnWriteError(E.COORDINATOR_NOT_AVAILABLE, f"cannot create {OFFSETS_TOPIC}: {exc}") from exc
        state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
        if state is None:
            raise TxnWriteError(E.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{partition} is not hosted here")
        return state.log, state.leader_epoch

    def _appended(self, topic: str, partition: int) -> None:
        state = self.broker.partitions.get((topic, partition))
        if state is not None:
            state.log.high_watermark = state.log.log_end_offset
            state.notify()

    def _state_appended(self, partition: int) -> None:
        self._appended(TRANSACTION_STATE_TOPIC, partition)

    def _offsets_appended(self, partition: int) -> None:
        self._appended(OFFSETS_TOPIC, partition)

    # -- timers and markers ------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Poll the coordinator at each deadline, or sooner when a call wakes us."""
        task_status.started()
        while True:
            wakeup = self._wakeup = trio.Event()
            deadline = self.coordinator.poll(now_ms())
            self._send_markers()
            wait_s = math.inf if deadline is None else max(deadline - now_ms(), 0) / 1000
            with trio.move_on_after(wait_s):
                await wakeup.wait()

    def _send_markers(self) -> None:
        for job in self.coordinator.take_marker_jobs():
            entry = MarkerEntry(
                job.producer_id, job.producer_epoch, job.coordinator_epoch, job.commit, tuple(sorted(job.partitions))
            )
            (errors,) = write_markers(self.broker, [entry])
            self.coordinator.on_markers_written(job, errors, now_ms())

    def _after_call(self) -> None:
        self._wakeup.set()

    # -- the calls handlers make ------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int, epoch: int) -> InitResult:
        result = self.coordinator.init_producer_id(transactional_id, timeout_ms, producer_id, epoch, now_ms())
        self._after_call()
        return result

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        error = self.coordinator.add_partitions(transactional_id, producer_id, epoch, partitions, now_ms())
        self._after_call()
        return error

    def offsets_partition(self, group_id: str) -> TopicPartition:
        """The ``__consumer_offsets`` partition a group's (transactional) offsets go to."""
        return OFFSETS_TOPIC, self.broker.groups.coordinator.partition_for(group_id)

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> ErrorCode:
        """AddOffsetsToTxn: the group's offsets partition joins the transaction."""
        try:
            self.broker.groups.ensure_offsets_topic()
        except ControllerError:
            return E.COORDINATOR_NOT_AVAILABLE
        return self.add_partitions(transactional_id, producer_id, epoch, [self.offsets_partition(group_id)])

    @property
    def verification_enabled(self) -> bool:
        """transaction.partition.verification.enable (Kafka's default: true): whether partition
        leaders check a transaction's first batch with the coordinator (KIP-890 part 1)."""
        return self.broker.config.get_bool("transaction.partition.verification.enable")

    def verify(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        return self.coordinator.verify_partitions(transactional_id, producer_id, epoch, partitions)

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        error = self.coordinator.end_transaction(transactional_id, producer_id, epoch, commit, now_ms())
        self._after_call()
        return error

    def commit_offsets(self, request: TxnCommitRequest) -> list[tuple[str, int, ErrorCode]]:
        """TxnOffsetCommit's group part (the transaction was verified by the handler)."""
        return commit_transactional_offsets(self.broker.groups.coordinator, self._offsets_writer, request, now_ms())

    def describe(self, transactional_ids: Iterable[str]) -> list[DescribedTxn]:
        return [self.coordinator.describe(t) for t in transactional_ids]

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int) -> ListResult:
        return self.coordinator.list_transactions(states, producer_ids, duration_ms, now_ms())
