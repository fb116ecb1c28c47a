"""The trio adapter around the pure transaction coordinator (kafkalike.txn), and the marker path.

Rules:

- One ``TransactionCoordinator`` shard per partition of ``__transaction_state`` this broker
  leads, run by the coordinator runtime (``coordinator_runtime``: loading, unloading, the write
  path, timers, the reload after a failed fsync); a transactional id whose partition has no
  shard here is answered NOT_COORDINATOR, one still loading COORDINATOR_LOAD_IN_PROGRESS. A
  shard's coordinator epoch is its partition's leader epoch, as in Kafka.
- After every shard call the timer task is woken: it hands the markers the call asked for to
  the marker channel (``txn_markers``, Kafka's TransactionMarkerChannelManager), which queues
  them per destination broker and sends each broker everything queued for it in one
  WriteTxnMarkers (this broker's own partitions through ``write_markers``, the function the
  WriteTxnMarkers handler serves); failed ones are routed again when the metadata changes. As
  in Kafka, EndTxn is answered once PrepareCommit / PrepareAbort is durable, and the markers
  follow; the id answers CONCURRENT_TRANSACTIONS until they are all written.
- The timer task sleeps until a shard's next deadline (timed-out transactions, transactional
  id expiry, retries) or until woken, then polls the shards and writes their markers.
- The records go to ``__transaction_state``, created on first use with
  ``transaction.state.log.num.partitions`` compacted partitions (before the call that needs
  it, as a metadata operation of its own), whose shards are then loaded. A call is answered
  once its partition's records are committed; markers are written only once the PrepareCommit
  / PrepareAbort they follow is committed. A loaded shard completes every transaction it
  finds in PrepareCommit / PrepareAbort (at start-up, before the broker serves anything).
- A failed fsync cuts the partition's log back to what is durable and its shard is loaded
  again from it; the calls that waited on the cut records are answered NOT_COORDINATOR, as
  Kafka maps KAFKA_STORAGE_ERROR on that write. A shard unloaded while its markers are being
  written drops their answer: the shard that loads the partition next writes them again.
- A marker appended to a ``__consumer_offsets`` partition also ends the producer's pending
  transactional offsets there (``kafkalike.group.txn_offsets``), and is made durable with the
  group coordinator's records (a cut there takes it too); such a marker needs that
  partition's group shard ACTIVE here (NOT_COORDINATOR, retried, otherwise, as Kafka's group
  coordinator answers it). Partitions that got markers are flushed, on a worker thread,
  before the coordinator records the transaction complete.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import trio

from kafkalike.controller.api_error import ControllerError
from kafkalike.coordinator import NotActive, ShardSlot
from kafkalike.group import OFFSETS_TOPIC
from kafkalike.group.txn_offsets import TxnCommitRequest
from kafkalike.log import AppendOrigin, LogError, PartitionLog
from kafkalike.log.coordinator_log import Appended
from kafkalike.log.partition_log import FlushTicket, RollNeeded
from kafkalike.log.storage import DeferredSyncs
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import build_end_txn_marker
from kafkalike.replica import AppliedChanges
from kafkalike.server.coordinator_runtime import (
    NEW_TOPIC_LOAD_WAIT_S,
    CoordinatorRuntime,
    internal_topic_replication,
)
from kafkalike.server.coordinator_syncs import CoordinatorSyncs
from kafkalike.server.inter_broker import BrokerUnreachable, InterBrokerClient
from kafkalike.server.listener_config import BrokerListeners
from kafkalike.server.txn_markers import MarkerChannel
from kafkalike.txn import (
    TRANSACTION_STATE_TOPIC,
    DescribedTxn,
    InitResult,
    ListResult,
    LogTxnStore,
    MarkerJob,
    TopicPartition,
    TransactionCoordinator,
    TxnConfig,
    TxnLogScan,
)
from kafkalike.txn.records import LoadedTxn
from kafkalike.txn.state import TxnState

if TYPE_CHECKING:
    from kafkalike.server.broker import Broker
    from kafkalike.server.config import BrokerConfig

log = logging.getLogger("kafkalike.transactions")
E = ErrorCode
WRITE_TXN_MARKERS, ADD_PARTITIONS_TO_TXN = 27, 24
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
    await _until_replicated(broker, results, {tp: plog.log_end_offset for tp, plog in touched.items()})
    return results


async def _until_replicated(
    broker: Broker, results: list[dict[TopicPartition, ErrorCode]], ends: dict[TopicPartition, int]
) -> None:
    """Markers are appended with acks=all (Kafka's WriteTxnMarkers): answered once each
    partition's high watermark passed them, so a marker is never lost with its leader; else
    REQUEST_TIMED_OUT after request.timeout.ms (the coordinator sends it again), or the error
    ``replicated_to`` names."""
    waiting = [(p, end) for tp, end in ends.items() if (p := broker.replicas.get(tp)) is not None]
    if not waiting:
        return
    timeout_ms = broker.cluster.channel.request_timeout_ms if broker.cluster is not None else 30_000
    deadline = broker.clock.monotonic_s() + timeout_ms / 1000
    codes = await broker.waiters.until_replicated(waiting, deadline)
    for (partition, _), code in zip(waiting, codes, strict=True):
        if code is ErrorCode.NONE:
            continue
        log.info("marker of %s-%d not replicated: %s", *partition.tp, code.name)
        for errors in results:
            if errors.get(partition.tp) is E.NONE:
                errors[partition.tp] = code


async def _no_flush_in_flight(broker: Broker, partitions: set[TopicPartition]) -> None:
    """Until no append to ``partitions`` waits for its fsync on a worker thread: a marker
    appended behind it would be in the way if that append had to be cut."""
    for _ in range(MAX_FLUSH_WAITS):
        busy = [s for tp in partitions if (s := broker.replicas.get(tp)) is not None and s.write_in_flight]
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
        state = broker.replicas[tp]
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
    state = broker.replicas.get(tp)
    if state is None:  # another broker's, or unknown (Kafka's getPartitionOrError)
        return E.NOT_LEADER_OR_FOLLOWER if broker.routing.knows(*tp) else E.UNKNOWN_TOPIC_OR_PARTITION
    if broker.faults.is_paused(*tp) or not state.is_leader:
        return E.NOT_LEADER_OR_FOLLOWER
    if len(state.isr) < state.effective_min_isr:  # appended with acks=all, as Kafka's markers are
        return E.NOT_ENOUGH_REPLICAS
    if tp[0] == OFFSETS_TOPIC:
        try:  # its group shard takes the transaction's pending offsets there
            broker.groups.runtime.shards.active(tp[1])
        except NotActive as exc:
            return exc.error
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
        broker.groups.complete_transaction(tp[1], marker.producer_id, marker.commit, now)
        return E.NONE
    syncs.discard()  # the flush below covers it
    touched[tp] = state.log
    state.maybe_increment_high_watermark(now)
    return E.NONE


# -- the service ------------------------------------------------------------------------------


class TxnService:
    """The transaction coordinator's shards, and the calls handlers make (``ShardKind`` of the runtime)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.runtime: CoordinatorRuntime[TransactionCoordinator] = CoordinatorRuntime(
            TRANSACTION_STATE_TOPIC,
            self,
            broker.replicas,
            broker.clock.wall_ms,
            lambda: broker.controller.image.topics,
            lambda topic, partition: broker.routing.leader_of(topic, partition),
            waiters=broker.waiters,
            monotonic_s=broker.clock.monotonic_s,
        )
        self._config: TxnConfig | None = None
        self._inter_broker: InterBrokerClient | None = None
        self._store = LogTxnStore(self.runtime.log_for, on_append=self.runtime.on_durable, tracker=self.syncs.tracker)
        # Replaced after each attempt at delivering markers (an answer, or none), so a waiter
        # (a test looking at a transaction half-way) wakes once per attempt without missing one.
        self.markers_answered = trio.Event()
        self.markers = MarkerChannel(
            broker.node_id,
            route=self._route,
            write_local=lambda entries: write_markers(self.broker, entries),
            send=self._send_remote_markers,
            report=self._report_markers,
            wanted=self._markers_wanted,
            metadata_changed=self._metadata_changed,
            entry=_entry_for,
            answered=self._note_markers_answered,
        )

    @property
    def syncs(self) -> CoordinatorSyncs:
        return self.runtime.syncs

    @property
    def config(self) -> TxnConfig:
        assert self._config is not None, "TxnService.open() first"
        return self._config

    def shard_for(self, transactional_id: str) -> TransactionCoordinator:
        """The id's ACTIVE shard; raises NotActive (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
        return self.runtime.shard_for(transactional_id)

    def coordinator_node(self, transactional_id: str) -> int | None:
        """The node coordinating the id (the leader of its partition), None while there is none
        (``__transaction_state`` not made yet, or its partition leaderless)."""
        if not self.runtime.topic_exists():
            return None
        return self.runtime.leader_of(transactional_id)

    def request_state_topic(self) -> bool:
        """Whether ``__transaction_state`` is in this broker's metadata; if not, it is asked for
        in the background (FindCoordinator's first answer is COORDINATOR_NOT_AVAILABLE)."""
        if self.runtime.topic_exists():
            return True
        self.broker.request_internal_topic(TRANSACTION_STATE_TOPIC, self._ensure_state_topic)
        return False

    # -- the runtime's ShardKind ------------------------------------------------------------

    def partition_count(self) -> int:
        return self.config.state_log_partitions

    def new_shard(self, partition: int, leader_epoch: int) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.config, self._store, self.broker.controller.allocate_producer_id, coordinator_epoch=leader_epoch
        )

    def scan(self, partition: int) -> TxnLogScan:
        return TxnLogScan()

    def apply(
        self, shard: TransactionCoordinator, partition: int, records: Sequence[LoadedTxn | None], now_ms: int
    ) -> None:
        for loaded in records:
            shard.replay_decoded(loaded)

    def loaded(self, shard: TransactionCoordinator, partition: int, finished: None, now_ms: int) -> None:
        """Every transaction found half-way completed given its markers."""
        shard.on_loaded(now_ms)

    def unloaded(self, shard: TransactionCoordinator, partition: int) -> None:
        """Nothing is parked in a transaction shard: its waiting calls fail with its appends."""

    def called(self, shard: TransactionCoordinator, partition: int) -> None:
        """Its markers, if the call asked for any, go out from the timer task (woken)."""

    async def polled(self, slots: Sequence[ShardSlot[TransactionCoordinator]]) -> None:
        for slot in slots:
            await self._send_markers(slot)

    # -- start-up and storage ---------------------------------------------------------------

    def open(self) -> None:
        """A shard for each ``__transaction_state`` partition led here (the group shards, with the
        transactional offsets, are loaded by now); then what the previous run left half-way
        finished before anything is served."""
        self._config = txn_config(self.broker)
        self.runtime.load_led_partitions()
        for slot in self.runtime.shards.active_slots():
            self._send_markers_at_once(slot.shard)

    async def _ensure_state_topic(self) -> None:
        """``__transaction_state`` made the first time it is needed, as a metadata operation that
        waits its turn (a failure surfaces as the call's NOT_COORDINATOR: no shard); then its
        shards loaded."""
        created = False
        if TRANSACTION_STATE_TOPIC not in self.broker.controller.image.topics:
            configs = {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "segment.bytes": str(self.broker.config.get_int("transaction.state.log.segment.bytes")),
                "min.insync.replicas": str(self.broker.config.get_int("transaction.state.log.min.isr")),
                "unclean.leader.election.enable": "false",
            }
            factor = internal_topic_replication(
                self.broker.config.get_int("transaction.state.log.replication.factor"),
                "transaction.state.log.replication.factor",
                TRANSACTION_STATE_TOPIC,
                self.broker.registered_brokers(),
            )
            try:
                partitions = self.config.state_log_partitions
                created = await self.broker.create_internal_topic(TRANSACTION_STATE_TOPIC, partitions, configs, factor)
            except ControllerError as exc:
                log.debug("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc)
        self.runtime.load_led_partitions()
        if created:
            log.info("created %s", TRANSACTION_STATE_TOPIC)
            # As for the offsets topic (group_service): answered once the new shards serve.
            await self.runtime.wait_loaded(NEW_TOPIC_LOAD_WAIT_S)

    # -- markers -----------------------------------------------------------------------------

    def _send_markers_at_once(self, shard: TransactionCoordinator) -> None:
        """At start-up: the markers of partitions led here; those led elsewhere are left
        unanswered, so the shard retries them from the timer task."""
        for job in shard.take_marker_jobs():
            entry = _entry(job)
            local = [tp for tp in entry.partitions if self._route(tp) == self.broker.node_id]
            if local:
                (errors,) = write_markers_at_once(self.broker, [replace(entry, partitions=tuple(local))])
            else:
                errors = {}
            shard.on_markers_written(job, errors, self.broker.clock.wall_ms())

    # -- markers to partitions led by other brokers ------------------------------------------

    @property
    def _listener(self) -> str:
        return _inter_broker_listener(self.broker.config)

    @property
    def inter_broker(self) -> InterBrokerClient | None:
        """The client to other brokers, on a broker in a cluster (made on first use)."""
        cluster = self.broker.cluster
        if cluster is None:
            return None
        if self._inter_broker is None:
            listener = self._listener
            routing = self.broker.routing
            self._inter_broker = InterBrokerClient(
                self.broker.node_id,
                lambda broker_id: routing.alive_endpoint(broker_id, listener),
                faults=cluster.channel.faults,
                request_timeout_ms=cluster.channel.request_timeout_ms,  # the broker's request.timeout.ms
            )
        return self._inter_broker

    def _route(self, tp: TopicPartition) -> int | None:
        """Where a marker of ``tp`` goes: this broker when it leads the partition (or has no
        controller to reach others through), else its leader in the metadata (-1: none now, or one without a live endpoint;
        None: the metadata does not have it, a deleted topic's). A follower's copy is not
        where a marker is written: it would answer NOT_LEADER_OR_FOLLOWER for as long as it follows."""
        hosted = self.broker.replicas.get(tp)
        if self.inter_broker is None or (hosted is not None and hosted.is_leader):
            return self.broker.node_id
        leader = self.broker.routing.leader_of(*tp)
        if leader is None:
            return None
        if leader[0] < 0 or self.broker.routing.alive_endpoint(leader[0], self._listener) is None:
            return -1
        return leader[0]

    async def _metadata_changed(self) -> None:
        seen = self.broker.publisher.image
        await self.broker.publisher.wait_until(lambda image: image is not seen)

    async def _send_remote_markers(
        self, leader: int, entries: Sequence[MarkerEntry]
    ) -> list[dict[TopicPartition, ErrorCode]] | None:
        """One WriteTxnMarkers to ``leader`` with every entry; the errors per entry, or None when
        the leader could not be reached (Kafka's disconnection)."""
        client = self.inter_broker
        assert client is not None
        markers = []
        for entry in entries:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in entry.partitions:
                by_topic.setdefault(topic, []).append(partition)
            markers.append(
                {
                    "producer_id": entry.producer_id,
                    "producer_epoch": entry.producer_epoch,
                    "transaction_result": entry.commit,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": entry.coordinator_epoch,
                }
            )
        try:
            response = await client.request(leader, WRITE_TXN_MARKERS, 1, {"markers": markers})
        except BrokerUnreachable as exc:
            log.info("markers to broker %d not sent: %s", leader, exc)
            return None
        # Kafka answers per producer id (errorsByProducerId), in no particular order.
        by_producer: dict[int, dict[TopicPartition, ErrorCode]] = {}
        for marker in response.markers:
            errors = by_producer.setdefault(marker.producer_id, {})
            for topic in marker.topics:
                for p in topic.partitions:
                    tp = (topic.name, p.partition_index)
                    errors[tp] = self._remote_error(tp, ErrorCode(p.error_code))
        return [
            {tp: by_producer.get(e.producer_id, {}).get(tp, E.REQUEST_TIMED_OUT) for tp in e.partitions}
            for e in entries
        ]

    def _remote_error(self, tp: TopicPartition, error: ErrorCode) -> ErrorCode:
        """A leader that does not host a partition the metadata still has is behind on its
        metadata, or moved: retried (Kafka retries UNKNOWN_TOPIC_OR_PARTITION), not dropped."""
        if error is E.UNKNOWN_TOPIC_OR_PARTITION and self.broker.routing.knows(*tp):
            return E.NOT_LEADER_OR_FOLLOWER
        return error

    def _markers_wanted(self, slot: ShardSlot[TransactionCoordinator], job: MarkerJob) -> bool:
        """The job's shard still loaded and its transaction still the one preparing."""
        if not self.runtime.shards.is_current(slot):
            return False
        txn = slot.shard.txns.get(job.transactional_id)
        current = txn is not None and (txn.producer_id, txn.producer_epoch) == (job.producer_id, job.producer_epoch)
        return txn is not None and current and txn.state.is_preparing

    def _report_markers(
        self, slot: ShardSlot[TransactionCoordinator], job: MarkerJob, errors: dict[TopicPartition, ErrorCode]
    ) -> None:
        slot.shard.on_markers_written(job, errors, self.broker.clock.wall_ms())
        slot.touched = True  # its next deadline may have moved
        self.runtime.wake()

    def _note_markers_answered(self) -> None:
        answered, self.markers_answered = self.markers_answered, trio.Event()
        answered.set()

    async def _send_markers(self, slot: ShardSlot[TransactionCoordinator]) -> None:
        """Each of the shard's jobs handed to the marker channel once the PrepareCommit /
        PrepareAbort before it is committed; a job whose record was cut, or whose shard was
        unloaded, is dropped."""
        shard = slot.shard
        for job in shard.take_marker_jobs():
            prepared = self.runtime.pending([slot.partition])
            if not await self.runtime.committed(prepared) or not self._markers_wanted(slot, job):
                continue  # cut by a reload meanwhile: what it found preparing has jobs of its own
            self.markers.add(slot, job)

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
        return await self.runtime.write(
            transactional_id,
            lambda shard, now: shard.init_producer_id(transactional_id, timeout_ms, producer_id, epoch, now),
            InitResult,
        )

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        return await self.runtime.write(
            transactional_id,
            lambda shard, now: shard.add_partitions(transactional_id, producer_id, epoch, partitions, now),
            ErrorCode,
        )

    def offsets_partition(self, group_id: str) -> TopicPartition:
        """The ``__consumer_offsets`` partition a group's (transactional) offsets go to."""
        return OFFSETS_TOPIC, self.broker.groups.partition_for(group_id)

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
        wanted = list(partitions)
        return self.runtime.read(
            transactional_id,
            lambda shard: shard.verify_partitions(transactional_id, producer_id, epoch, wanted),
            lambda error: dict.fromkeys(wanted, error),
        )

    async def verify_anywhere(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """``verify``, asked of the coordinator where it is: this broker's shard, or, when
        another broker leads the id's partition, an AddPartitionsToTxn v4 with verify_only
        (Kafka's AddPartitionsToTxnManager): COORDINATOR_NOT_AVAILABLE while no broker leads it,
        NETWORK_EXCEPTION when the coordinator could not be asked, the coordinator's
        top-level error for every partition when it answered one."""
        wanted = list(partitions)
        node = self.coordinator_node(transactional_id) if self.inter_broker is not None else None
        if self.inter_broker is None or node == self.broker.node_id:
            return self.verify(transactional_id, producer_id, epoch, wanted)
        if node is None:
            return dict.fromkeys(wanted, E.COORDINATOR_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append(partition)
        body = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                    "verify_only": True,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            ]
        }
        try:
            response = await self.inter_broker.request(node, ADD_PARTITIONS_TO_TXN, 4, body)
        except BrokerUnreachable as exc:
            log.warning("cannot verify %r with its coordinator %d: %s", transactional_id, node, exc)
            return dict.fromkeys(wanted, E.NETWORK_EXCEPTION)
        if response.error_code:
            error = ErrorCode(response.error_code)
            # A client must not see the cluster authorization failure of this broker's own request.
            return dict.fromkeys(wanted, E.INVALID_TXN_STATE if error is E.CLUSTER_AUTHORIZATION_FAILED else error)
        answered = dict.fromkeys(wanted, E.NONE)
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    answered[(topic.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return answered

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        """EndTxn, answered once PrepareCommit / PrepareAbort is committed."""
        return await self.runtime.write(
            transactional_id,
            lambda shard, now: shard.end_transaction(transactional_id, producer_id, epoch, commit, now),
            ErrorCode,
        )

    async def commit_offsets(self, request: TxnCommitRequest) -> list[tuple[str, int, ErrorCode]]:
        """TxnOffsetCommit's group part, which the group coordinator writes and answers."""
        return await self.broker.groups.commit_transactional_offsets(request)

    def describe(self, transactional_ids: Iterable[str]) -> list[DescribedTxn]:
        return [self._described(t) for t in transactional_ids]

    def _described(self, transactional_id: str) -> DescribedTxn:
        return self.runtime.read(
            transactional_id,
            lambda shard: shard.describe(transactional_id),
            lambda error: DescribedTxn(transactional_id, error),
        )

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int) -> ListResult:
        """Every shard's transactions; COORDINATOR_LOAD_IN_PROGRESS while one is still loading,
        as Kafka's TransactionStateManager answers."""
        if self.runtime.shards.loading():
            return ListResult(E.COORDINATOR_LOAD_IN_PROGRESS)
        names, pids, now = list(states), list(producer_ids), self.broker.clock.wall_ms()
        results = [s.shard.list_transactions(names, pids, duration_ms, now) for s in self.runtime.shards.active_slots()]
        if not results:
            return ListResult(E.NONE, tuple(n for n in names if TxnState.from_name(n) is None))
        listed = tuple(t for r in results for t in r.transactions)
        return replace(results[0], transactions=listed)

    def on_replica_changes(self, changes: AppliedChanges) -> None:
        """The replica manager applied a metadata delta: shards follow ``__transaction_state``'s leadership."""
        self.runtime.on_replica_changes(changes)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.markers.run)
            await nursery.start(self.runtime.run)
            task_status.started()

    async def aclose(self) -> None:
        """The connections to other brokers closed."""
        if self._inter_broker is not None:
            await self._inter_broker.aclose()


def _entry(job: MarkerJob) -> MarkerEntry:
    return _entry_for(job, job.partitions)


def _entry_for(job: MarkerJob, partitions: frozenset[TopicPartition]) -> MarkerEntry:
    return MarkerEntry(
        job.producer_id, job.producer_epoch, job.coordinator_epoch, job.commit, tuple(sorted(partitions))
    )


def _inter_broker_listener(config: BrokerConfig) -> str:
    """``inter.broker.listener.name`` (or the listener of security.inter.broker.protocol), as
    the start-up check accepted it."""
    return BrokerListeners.from_config(config).inter_broker_name
