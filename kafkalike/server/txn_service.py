"""The trio adapter around the pure transaction coordinator (kafkalike.txn), and the marker path.

Rules:

- The coordinator is only touched in synchronous code between awaits, by handlers and by one
  timer task; the time is read here, from the broker's clock, and passed in.
- After every coordinator call the timer task is woken: it writes the markers the call asked
  for, through ``write_markers`` (the same function the WriteTxnMarkers handler serves, so a
  marker takes the path it would take from a coordinator on another broker). As in Kafka, EndTxn
  is answered once PrepareCommit / PrepareAbort is durable, and the markers follow; the id
  answers CONCURRENT_TRANSACTIONS until they are all written.
- The timer task sleeps until the coordinator's next deadline (timed-out transactions,
  transactional id expiry, retries) or until woken, then polls and writes markers.
- The coordinator's records go to ``__transaction_state``, created on first use with
  ``transaction.state.log.num.partitions`` compacted partitions (before the call that needs
  it, as a metadata operation of its own). Each call's appends are fsynced on a worker thread
  (``CoordinatorSyncs``) and the call answered once they are durable; markers are written
  only once the PrepareCommit / PrepareAbort they follow is durable. At start-up the topic is
  read back and replayed, and every transaction found in PrepareCommit / PrepareAbort is
  completed before the broker serves anything.
- A failed fsync cuts the partition's log back to what is durable and that partition's
  transactional ids are replayed from it (Kafka's unload and reload of a coordinator partition
  whose log write failed); the calls that waited on the cut records are answered
  NOT_COORDINATOR, as Kafka maps KAFKA_STORAGE_ERROR on that write.
- A marker appended to a ``__consumer_offsets`` partition also ends the producer's pending
  transactional offsets there (``kafkalike.group.txn_offsets``), and is made durable with the
  group coordinator's records (a cut there takes it too); partitions that got markers are
  flushed, on a worker thread, before the coordinator records the transaction complete.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
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
from kafkalike.log.coordinator_log import Appended
from kafkalike.log.partition_log import FlushTicket, RollNeeded
from kafkalike.log.storage import DeferredSyncs
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import build_end_txn_marker
from kafkalike.server.coordinator_syncs import CoordinatorSyncs
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
MAX_FLUSH_WAITS = 1000  # appends a marker waits behind (each one fsync) before it goes in anyway


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


def write_markers_at_once(broker: Broker, markers: Sequence[MarkerEntry]) -> list[dict[TopicPartition, ErrorCode]]:
    """``write_markers`` with the flush on the event loop (at start-up, before anything is served)."""
    now = broker.clock.wall_ms()
    touched: dict[TopicPartition, PartitionLog] = {}
    offsets_appends: dict[TopicPartition, Appended] = {}
    results = [
        {tp: _write_marker(broker, m, tp, now, touched, offsets_appends) for tp in m.partitions} for m in markers
    ]
    for tp, plog in touched.items():
        try:
            plog.flush(now)
        except (LogError, OSError) as exc:
            log.warning("cannot flush the marker of %s-%d: %s", *tp, exc)
            _refuse(results, tp)
    for tp, appended in offsets_appends.items():
        broker.groups.syncs.sync_here(tp[1])
        if not broker.groups.syncs.tracker.is_durable(appended):
            _refuse(results, tp)
    return results


async def write_markers(broker: Broker, markers: Sequence[MarkerEntry]) -> list[dict[TopicPartition, ErrorCode]]:
    """Append each marker to each of its partitions (as the partition leader does); the error
    per partition, per marker. Every partition that got a marker is flushed, on a worker thread,
    before returning (``__consumer_offsets`` partitions with the group coordinator's records)."""
    await _no_flush_in_flight(broker, {tp for m in markers for tp in m.partitions})
    now = broker.clock.wall_ms()
    touched: dict[TopicPartition, PartitionLog] = {}
    offsets_appends: dict[TopicPartition, Appended] = {}
    results: list[dict[TopicPartition, ErrorCode]] = []
    for m in markers:
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp in m.partitions:
            errors[tp] = await _write_marker_off_loop_roll(broker, m, tp, now, touched, offsets_appends)
        results.append(errors)
    syncs = DeferredSyncs()
    tickets: dict[TopicPartition, FlushTicket] = {}
    for tp, plog in touched.items():
        try:
            tickets[tp] = plog.prepare_flush(syncs)
        except (LogError, OSError) as exc:
            log.warning("cannot flush the marker of %s-%d: %s", *tp, exc)
            _refuse(results, tp)
    error: OSError | None = None
    if syncs:
        with trio.CancelScope(shield=True):  # its outcome must reach the logs
            try:
                await trio.to_thread.run_sync(syncs.run)
            except OSError as exc:
                error = exc
    else:
        syncs.discard()
    for tp, ticket in tickets.items():
        if error is None:
            touched[tp].complete_flush(ticket, broker.clock.wall_ms())
        else:
            log.warning("cannot flush the marker of %s-%d: %s", *tp, error)
            _refuse(results, tp)
    groups = broker.groups.syncs
    for tp, appended in offsets_appends.items():
        if not await groups.wait([appended]):
            _refuse(results, tp)
    return results


async def _no_flush_in_flight(broker: Broker, partitions: set[TopicPartition]) -> None:
    """Until no append to ``partitions`` waits for its fsync on a worker thread: a marker
    appended behind it would be in the way if that append had to be cut."""
    for _ in range(MAX_FLUSH_WAITS):
        busy = [s for tp in partitions if (s := broker.partitions.get(tp)) is not None and s.write_in_flight]
        if not busy:
            return
        await broker.writer.wait_idle(busy[0])


def _refuse(results: list[dict[TopicPartition, ErrorCode]], tp: TopicPartition) -> None:
    for errors in results:
        if errors.get(tp) is E.NONE:
            errors[tp] = E.KAFKA_STORAGE_ERROR


async def _write_marker_off_loop_roll(
    broker: Broker,
    marker: MarkerEntry,
    tp: TopicPartition,
    now: int,
    touched: dict[TopicPartition, PartitionLog],
    offsets_appends: dict[TopicPartition, Appended],
) -> ErrorCode:
    """``_write_marker``, with the new segment's files made on a worker thread when the marker
    needs one (as ``Broker.append`` does for a producer's batch)."""
    try:
        return _write_marker(broker, marker, tp, now, touched, offsets_appends, defer_roll=True)
    except RollNeeded:
        state = broker.partitions[tp]
        try:
            await broker.writer.roll(state)
        except LogError as exc:
            log.warning("cannot roll %s-%d for a marker: %s", *tp, exc)
            return E.KAFKA_STORAGE_ERROR
        # Another append may have started its fsync while the files were made: not behind it.
        await _no_flush_in_flight(broker, {tp})
        return _write_marker(broker, marker, tp, now, touched, offsets_appends)


def _write_marker(
    broker: Broker,
    marker: MarkerEntry,
    tp: TopicPartition,
    now: int,
    touched: dict[TopicPartition, PartitionLog],
    offsets_appends: dict[TopicPartition, Appended],
    *,
    defer_roll: bool = False,
) -> ErrorCode:
    """Append ``marker`` to ``tp``. With ``defer_roll``, raises RollNeeded (before changing
    anything) when the marker needs a new segment."""
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
    syncs = DeferredSyncs()
    try:
        result = state.log.append(
            bytearray(batch),
            leader_epoch=state.leader_epoch,
            now_ms=now,
            origin=AppendOrigin.COORDINATOR,
            syncs=syncs,
            defer_roll=defer_roll and state.log.directory.on_disk,
        )
    except LogError as exc:
        log.info("marker of producer %d refused by %s-%d: %s", marker.producer_id, *tp, exc)
        return ErrorCode(exc.error_code)
    except OSError as exc:
        log.warning("cannot write a marker to %s-%d: %s", *tp, exc)
        return E.KAFKA_STORAGE_ERROR
    if tp[0] == OFFSETS_TOPIC:  # durable with the group coordinator's records, which may cut it
        offsets_appends[tp] = broker.groups.syncs.tracker.appended(tp[1], state.log, result.first_offset, syncs)
        complete_transaction(broker.groups.coordinator, tp[1], marker.producer_id, marker.commit, now)
        return E.NONE
    syncs.discard()  # the flush below covers it
    touched[tp] = state.log
    state.maybe_increment_high_watermark()
    return E.NONE


# -- the service ------------------------------------------------------------------------------


class TxnService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._coordinator: TransactionCoordinator | None = None
        self._wakeup = trio.Event()
        # Replaced after each answer to a job's markers reached the coordinator, so a waiter
        # (a test looking at a transaction half-way) wakes once per answer without missing one.
        self.markers_answered = trio.Event()
        self.syncs = CoordinatorSyncs(self._reload, self._state_appended, broker.clock.wall_ms)
        self._offsets_writer = LogTxnOffsetWriter(
            self._offsets_log, on_append=self._offsets_appended, tracker=broker.groups.syncs.tracker
        )

    @property
    def coordinator(self) -> TransactionCoordinator:
        assert self._coordinator is not None, "TxnService.open() first"
        return self._coordinator

    # -- start-up and storage ---------------------------------------------------------------

    def open(self) -> None:
        """Replay the transactional offset commits (the group coordinator is open by now) and
        ``__transaction_state``, then finish what the previous run left half-way."""
        start = self.broker.clock.wall_ms()
        offsets = self.broker.controller.image.topics.get(OFFSETS_TOPIC)
        pending = 0
        for partition in range(offsets.partitions if offsets else 0):
            state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
            if state is not None:
                pending += replay_transactional_offsets(self.broker.groups.coordinator, state.log, start)
        records = self._load()
        self._send_markers_at_once()
        if records or pending:
            log.info(
                "replayed %d record(s) of %s and %d transactional offset commit(s) in %d ms",
                records,
                TRANSACTION_STATE_TOPIC,
                pending,
                self.broker.clock.wall_ms() - start,
            )

    def _load(self) -> int:
        """The coordinator built from ``__transaction_state`` (start-up, and after a cut);
        how many records were replayed."""
        store = LogTxnStore(self._state_log, on_append=self._state_appended, tracker=self.syncs.tracker)
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
        self.coordinator.on_loaded(self.broker.clock.wall_ms())
        return records

    def _reload(self, partition: int) -> None:
        """After a failed fsync cut ``__transaction_state-{partition}``: its transactional ids
        forgotten and replayed from what its log holds now; those found preparing get their
        markers again from the timer task. Other partitions' transactions go on."""
        log.info("transaction coordinator reloading %s-%d after a failed write", TRANSACTION_STATE_TOPIC, partition)
        self._state_appended(partition)
        self.coordinator.unload_partition(partition)
        state = self.broker.partitions.get((TRANSACTION_STATE_TOPIC, partition))
        if state is not None:
            self.coordinator.load_partition(read_records(state.log), self.broker.clock.wall_ms())
        self._wakeup.set()

    async def _ensure_state_topic(self) -> None:
        """``__transaction_state`` made the first time it is needed, as a metadata operation that
        waits its turn (a failure surfaces as the call's error, from ``_state_log``)."""
        if TRANSACTION_STATE_TOPIC in self.broker.controller.image.topics:
            return
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "segment.bytes": str(self.broker.config.get_int("transaction.state.log.segment.bytes")),
        }
        try:
            partitions = self.coordinator.config.state_log_partitions
            if await self.broker.create_internal_topic(TRANSACTION_STATE_TOPIC, partitions, configs):
                log.info("created %s", TRANSACTION_STATE_TOPIC)
        except ControllerError as exc:
            log.debug("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc)

    def _state_log(self, partition: int) -> tuple[PartitionLog, int]:
        if TRANSACTION_STATE_TOPIC not in self.broker.controller.image.topics:
            raise StoreError(f"{TRANSACTION_STATE_TOPIC} could not be created")
        state = self.broker.partitions.get((TRANSACTION_STATE_TOPIC, partition))
        if state is None:
            raise StoreError(f"{TRANSACTION_STATE_TOPIC}-{partition} is not hosted here")
        return state.log, state.leader_epoch

    def _offsets_log(self, partition: int) -> tuple[PartitionLog, int]:
        if OFFSETS_TOPIC not in self.broker.controller.image.topics:
            raise TxnWriteError(E.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} could not be created")
        state = self.broker.partitions.get((OFFSETS_TOPIC, partition))
        if state is None:
            raise TxnWriteError(E.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{partition} is not hosted here")
        return state.log, state.leader_epoch

    def _state_appended(self, partition: int) -> None:
        """Records became durable (or were cut): the high watermark follows what is durable."""
        state = self.broker.partitions.get((TRANSACTION_STATE_TOPIC, partition))
        if state is not None:
            synced = self.syncs.tracker.partitions.get(partition)
            end = state.log.log_end_offset
            state.update_high_watermark(end if synced is None else min(synced.durable_end, end))

    def _offsets_appended(self, partition: int) -> None:
        self.broker.groups.on_durable(partition)

    # -- timers and markers ------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Poll the coordinator at each deadline, or sooner when a call wakes us."""
        task_status.started()
        while True:
            wakeup = self._wakeup = trio.Event()
            deadline = self.coordinator.poll(self.broker.clock.wall_ms())
            await self._send_markers()
            wait_s = math.inf if deadline is None else max(deadline - self.broker.clock.wall_ms(), 0) / 1000
            with trio.move_on_after(wait_s):
                await wakeup.wait()

    def _send_markers_at_once(self) -> None:
        for job in self.coordinator.take_marker_jobs():
            entry = MarkerEntry(
                job.producer_id, job.producer_epoch, job.coordinator_epoch, job.commit, tuple(sorted(job.partitions))
            )
            (errors,) = write_markers_at_once(self.broker, [entry])
            self.coordinator.on_markers_written(job, errors, self.broker.clock.wall_ms())

    async def _send_markers(self) -> None:
        """Each job's markers, once the PrepareCommit / PrepareAbort before them is durable; a
        job whose record was cut (its partition reloaded without it) is dropped."""
        coordinator = self.coordinator
        for job in coordinator.take_marker_jobs():
            prepared = self.syncs.tracker.log_end(coordinator.partition_for(job.transactional_id))
            if prepared is not None and not await self.syncs.wait([prepared]):
                continue
            txn = coordinator.txns.get(job.transactional_id)
            current = txn is not None and (txn.producer_id, txn.producer_epoch) == (job.producer_id, job.producer_epoch)
            if txn is None or not current or not txn.state.is_preparing:
                continue  # cut by a reload meanwhile: what it found preparing has jobs of its own
            entry = MarkerEntry(
                job.producer_id, job.producer_epoch, job.coordinator_epoch, job.commit, tuple(sorted(job.partitions))
            )
            (errors,) = await write_markers(self.broker, [entry])
            coordinator.on_markers_written(job, errors, self.broker.clock.wall_ms())
            answered, self.markers_answered = self.markers_answered, trio.Event()
            answered.set()

    def _after_call(self, transactional_id: str) -> list[Appended]:
        """After a coordinator call: what the id's partition holds that is not durable yet,
        to be durable before the call is answered (whether or not the call wrote it)."""
        self._wakeup.set()
        pending = self.syncs.tracker.log_end(self.coordinator.partition_for(transactional_id))
        return [] if pending is None else [pending]

    async def _durable(self, pending: list[Appended]) -> bool:
        return not pending or await self.syncs.wait(pending)

    # -- the calls handlers make ------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, epoch: int
    ) -> InitResult:
        await self._ensure_state_topic()
        try:
            await self.broker.reserve_producer_id()
        except ControllerError as exc:  # Kafka's answer while no producer id block can be had
            log.warning("no producer id block for transactional id %r: %s", transactional_id, exc.message)
            return InitResult(E.COORDINATOR_LOAD_IN_PROGRESS)
        result = self.coordinator.init_producer_id(
            transactional_id, timeout_ms, producer_id, epoch, self.broker.clock.wall_ms()
        )
        if await self._durable(self._after_call(transactional_id)):
            return result
        return replace(result, error=E.NOT_COORDINATOR, producer_id=-1, producer_epoch=-1)

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        error = self.coordinator.add_partitions(
            transactional_id, producer_id, epoch, partitions, self.broker.clock.wall_ms()
        )
        return error if await self._durable(self._after_call(transactional_id)) else E.NOT_COORDINATOR

    def offsets_partition(self, group_id: str) -> TopicPartition:
        """The ``__consumer_offsets`` partition a group's (transactional) offsets go to."""
        return OFFSETS_TOPIC, self.broker.groups.coordinator.partition_for(group_id)

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> ErrorCode:
        """AddOffsetsToTxn: the group's offsets partition joins the transaction."""
        try:
            await self.broker.groups.ensure_offsets_topic()
        except ControllerError:
            return E.COORDINATOR_NOT_AVAILABLE
        return await self.add_partitions(transactional_id, producer_id, epoch, [self.offsets_partition(group_id)])

    @property
    def verification_enabled(self) -> bool:
        """transaction.partition.verification.enable (Kafka's default: true): whether partition
        leaders check a transaction's first batch with the coordinator (KIP-890 part 1)."""
        return self.broker.config.get_bool("transaction.partition.verification.enable")

    def verify(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        return self.coordinator.verify_partitions(transactional_id, producer_id, epoch, partitions)

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        """EndTxn, answered once PrepareCommit / PrepareAbort is durable."""
        error = self.coordinator.end_transaction(
            transactional_id, producer_id, epoch, commit, self.broker.clock.wall_ms()
        )
        return error if await self._durable(self._after_call(transactional_id)) else E.NOT_COORDINATOR

    async def commit_offsets(self, request: TxnCommitRequest) -> list[tuple[str, int, ErrorCode]]:
        """TxnOffsetCommit's group part (the transaction was verified by the handler), answered
        once durable with the group coordinator's records; NOT_COORDINATOR if they were cut."""
        groups = self.broker.groups
        await groups.ready()
        result = commit_transactional_offsets(
            groups.coordinator, self._offsets_writer, request, self.broker.clock.wall_ms()
        )
        pending = groups.pending(request.group_id)
        if not pending or await groups.syncs.wait(pending):
            return result
        return [(t, p, E.NOT_COORDINATOR if e is E.NONE else e) for t, p, e in result]

    def describe(self, transactional_ids: Iterable[str]) -> list[DescribedTxn]:
        return [self.coordinator.describe(t) for t in transactional_ids]

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int) -> ListResult:
        return self.coordinator.list_transactions(states, producer_ids, duration_ms, self.broker.clock.wall_ms())
