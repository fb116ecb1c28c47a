"""The broker: partitions and their logs, the metadata controller, listeners, background jobs.

All state lives in this object and changes only in synchronous code between awaits (trio is
single-threaded), so handlers take no locks. Tasks exist only to wait: for connections,
for new data (long-poll fetch), and for timers (retention, flush).
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import trio

from kafkalike.controller.limits import (
    BATCH_TOO_LARGE,
    MAX_RECORDS_PER_USER_OP,
    PARTITIONS_OVER_LIMIT,
    RecordBudget,
    topic_records,
)
from kafkalike.controller.metadata import ControllerError, QuorumController, TopicImage
from kafkalike.log import LogConfig, LogManager, PartitionLog
from kafkalike.log.cleaner import LogCleaner
from kafkalike.log.dir_lock import LOCK_FILE_NAME, DirLock, LogDirError, lock_log_dirs
from kafkalike.log.errors import KafkaStorageError
from kafkalike.log.manager import run_flushes, write_checkpoints
from kafkalike.log.storage import DeferredSyncs
from kafkalike.log.storage_errors import reporter
from kafkalike.protocol.errors import ErrorCode
from kafkalike.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkalike.replica import ReplicaManager, delete_directories, rename_for_removal
from kafkalike.server.appends import PartitionWriter
from kafkalike.server.clock import Clock, SystemClock
from kafkalike.server.cluster_metadata import ClusterController, MetadataSource
from kafkalike.server.config import (
    INTERNAL_TOPIC_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    is_topic_config,
    parse_properties,
    validate_value,
)
from kafkalike.server.context import HandlerServices
from kafkalike.server.controller_channel import ControllerChannel
from kafkalike.server.faults import FaultInjector
from kafkalike.server.group_service import GroupService
from kafkalike.server.limits import ConnectionQuotas, RequestMemoryPool
from kafkalike.server.listener_config import BrokerListeners, ListenerEndpoint
from kafkalike.server.metadata_publisher import MetadataPublisher
from kafkalike.server.registry import Handler, load_handlers
from kafkalike.server.replica_files import open_logs_off_loop, undo_new
from kafkalike.server.routing import ClusterRouting, ImageRouting, LocalRouting, NodeEndpoint
from kafkalike.server.txn_service import TxnService
from kafkalike.server.waiters import PartitionWaiters

log = logging.getLogger("kafkalike.broker")
R = TypeVar("R")
METADATA_TOPIC = "__cluster_metadata"
META_PROPERTIES = "meta.properties"
BACKGROUND_RESTART_DELAY_S = 1.0
BACKGROUND_RESTART_LOG_INTERVAL_MS = 60_000


class StartupError(Exception):
    """Why the broker cannot start, in one line (Kafka's words where Kafka has them)."""


TOPICS_BETWEEN_CHECKPOINTS = 64
# One operation's records (up to 10,000) are one batch of the metadata log: as KRaft's batches
# may be, up to 8 MiB, beyond the default max.message.bytes.
METADATA_BATCH_BYTES = 8 * 1024 * 1024
# Metadata requests whose auto-creations may wait for the creator task; beyond it the names are
# answered as unknown and not created (the client asks again).
AUTO_CREATE_QUEUE = 64
INTERNAL_CREATE_QUEUE = 4  # __consumer_offsets and __transaction_state, each at most once on its way


def _new_cluster_id() -> str:
    """A random id as Kafka's ``Uuid.randomUuid`` makes one: never starting with "-", which a
    command line (``kafka-storage format -t ID``) would read as an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class OperationTooLarge(ControllerError):
    """A whole request refused: its records would not fit in one metadata operation."""


@dataclass
class NewTopic:
    """A topic a request asks for, after the request's own checks (replication, assignments)."""

    name: str
    partitions: int
    configs: dict[str, str]


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        ephemeral: bool = False,
        logs: LogManager | None = None,
        clock: Clock | None = None,
        own_metadata_log: bool = True,
    ) -> None:
        """``own_metadata_log`` False (a node of a cluster, whose metadata log is the quorum's):
        the broker's own controller keeps its records in memory, off ``__cluster_metadata-0``.
        ``ephemeral`` keeps every log in memory (no disk, no fsync); ``logs`` reuses the
        storage of a previous broker object, so an ephemeral broker can be restarted; ``clock``
        is the only clock the broker and everything it runs read (``SystemClock`` by default).
        Raises ValueError for a configuration Kafka would refuse to start with, StartupError for
        a data directory it cannot use (missing and not creatable, or locked by another process)."""
        config.check()
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.node_id = config.node_id
        self.data_dir = config.log_dirs[0]
        self.ephemeral = ephemeral or (logs is not None and logs.memory)
        self.handlers: dict[int, Handler] = load_handlers()
        # Locked before the log manager touches anything in the directories (it clears the
        # clean-shutdown marker), so a second broker on them changes nothing before it is refused.
        self._dir_locks: list[DirLock] = [] if self.ephemeral else _lock_dirs(config.log_dirs)
        self.logs = logs or LogManager(config.log_dirs, storage="memory" if ephemeral else "file")
        self.logs.checkpoint_interval_ms = config.get_int("log.flush.offset.checkpoint.interval.ms")
        # Requests waiting for partitions to move (long-poll fetch), woken by the replicas.
        self.waiters = PartitionWaiters()
        self.replicas = ReplicaManager(self.logs, self.node_id, on_progress=self.waiters.notify)
        self.writer = PartitionWriter(self.waiters, self.clock)
        self.cluster_id = ""
        self.advertised: tuple[str, int] = ("127.0.0.1", 9092)
        # Every client listener as bound, and what the broker advertises on each (set by ``serve``).
        self.bound_listeners: dict[str, tuple[str, int]] = {}
        self.advertised_endpoints: list[ListenerEndpoint] = []
        self.advertised_listeners: dict[str, tuple[str, int]] = {}
        self.faults = FaultInjector()
        # Kafka's broker binds its listeners at start-up but processes no request until the
        # controller has unfenced it: a cluster node sets ``hold_clients`` before ``serve`` and
        # ``clients_enabled`` once unfenced (connections wait in the listen backlog meanwhile).
        self.hold_clients = False
        self.clients_enabled = trio.Event()
        # Where partitions are led (server/routing.py): this node alone until a cluster's metadata
        # publisher replaces it with an ImageRouting over the published image.
        self.routing: ClusterRouting = LocalRouting(
            self.node_id,
            lambda name: None if (t := self.controller.image.topics.get(name)) is None else t.partitions,
            lambda listener: (
                None
                if (found := self.advertised_listeners.get(listener)) is None
                else NodeEndpoint(self.node_id, *found, self.config.get("broker.rack"))
            ),
        )
        # Shared by every connection: connection counts, and memory for requests in flight.
        self.connection_quotas = ConnectionQuotas(config)
        self.request_memory = RequestMemoryPool.from_config(config.get_int("queued.max.request.bytes"))
        self._metadata_log: PartitionLog | None = None
        self._metadata_logs = self.logs if own_metadata_log else LogManager(config.log_dirs, storage="memory")
        # The metadata quorum's leader epoch (DescribeQuorum); set when the metadata log is opened.
        self.metadata_epoch = 0
        # True while a metadata operation's records wait for their fsync on a worker thread
        # (``_commit_metadata``): nothing else may append to the metadata log meanwhile.
        self._metadata_syncing = False
        # The single node's own controller (its JSON records in ``__cluster_metadata-0``); a node
        # of a cluster runs on the quorum's committed metadata instead (``attach_controller``).
        self._legacy = QuorumController(self._append_metadata)
        self.controller: MetadataSource = self._legacy
        self.publisher = MetadataPublisher(
            self.node_id,
            self.replicas,
            clock=self.clock,
            log_config=self.log_config_for,
            on_configs=self._take_dynamic_configs,
        )
        self.cluster: ClusterController | None = None
        # The node's quorum state for DescribeQuorum (set by a node on the metadata quorum).
        self.describe_quorum: Callable[[], Awaitable[dict[str, Any]]] | None = None
        self.lifecycle: Any = None  # a cluster node's BrokerLifecycleTask (registration, heartbeats)
        self.in_cluster = not own_metadata_log
        self._checkpoint_lock = trio.Lock()
        self.groups = GroupService(self)
        self.txn = TxnService(self)
        # On a node of a cluster, coordinator shards follow the leadership the metadata gives.
        self.publisher.on_replica_changes += [
            self.groups.runtime.on_replica_changes,
            self.txn.runtime.on_replica_changes,
        ]
        # What handlers may touch (server/context.py): not this object.
        self.handler_services = HandlerServices(self)
        # Changes to topics that wait for disk work take turns, as operations on Kafka's
        # controller queue do; everything else (produce, fetch, metadata) goes on meanwhile.
        self._topic_changes = trio.Lock()
        self._topics_in_creation: set[str] = set()
        self._auto_create_pending: set[str] = set()
        self._auto_create_done = trio.Event()  # replaced after each auto-creation request is handled
        self._auto_create_send, self._auto_create_receive = trio.open_memory_channel[list[str]](AUTO_CREATE_QUEUE)
        # Internal topics asked for by FindCoordinator, made in the background (one at a time).
        self._internal_pending: set[str] = set()
        self._internal_done = trio.Event()  # replaced after each internal topic is made or refused
        self._internal_send, self._internal_receive = trio.open_memory_channel[
            tuple[str, Callable[[], Awaitable[None]]]
        ](INTERNAL_CREATE_QUEUE)

    # -- start-up ---------------------------------------------------------------------------

    def prepare_identity(self) -> str:
        """The cluster id, the data directory formatted first when it is empty (a single node
        formats itself); the same on every later call. Disk work: call it from a worker thread."""
        if not self.cluster_id:
            if self.ephemeral:
                self.cluster_id = self.config.get("cluster.id") or _new_cluster_id()
            else:
                self.data_dir.mkdir(parents=True, exist_ok=True)
                self.cluster_id = self._load_identity()
        return self.cluster_id

    def open(self) -> None:
        """Load the data directory: identity, metadata log replay, partition logs."""
        self.prepare_identity()
        if self.in_cluster:
            # Partitions open as the publisher replays the quorum's committed log.
            self._open_groups()
            self._open_transactions()
            return
        # Kept whole: Kafka deletes the metadata log only below its latest snapshot, never by age
        # or size (a restart replays every record from the start).
        metadata_config = LogConfig(
            flush_interval_messages=1, max_message_bytes=METADATA_BATCH_BYTES, retention_ms=-1, retention_bytes=-1
        )
        self._metadata_log = self._metadata_logs.get_or_create(METADATA_TOPIC, 0, metadata_config, self.clock.wall_ms())
        # The only voter wins each start's election: one epoch past the newest its log holds,
        # so a fresh node leads epoch 1, as a KRaft controller's first election does.
        self.metadata_epoch = (self._metadata_log.epoch_cache.latest_epoch or 0) + 1
        try:
            self._legacy.replay(self._read_metadata_values())
        except ValueError:  # not this node's JSON records: never misread them
            raise StartupError(
                f"The metadata log in {self.data_dir / (METADATA_TOPIC + '-0')} holds Kafka metadata records written "
                "by a node of a cluster: start this node with the server.properties of that node (--config)"
            ) from None
        self.apply_configs()
        for topic in self.controller.image.topics.values():
            self._open_partitions(topic)
        self.logs.remove_orphans(self.replicas.hosted() | {(METADATA_TOPIC, 0)})
        self._open_groups()
        self._open_transactions()

    def attach_controller(self, channel: ControllerChannel, committed_offset: Callable[[], int | None]) -> None:
        """A node of a cluster: metadata operations go to the active controller through
        ``channel``; ``committed_offset`` is the last offset this node knows committed."""
        self.cluster = ClusterController(self.node_id, channel, self.publisher, self.clock, committed_offset)
        self.controller = self.cluster
        publisher = self.publisher
        self.routing = ImageRouting(lambda: publisher.image)

    def remove_stray_partitions(self) -> list[tuple[str, int]]:
        """A node of a cluster, once its first image is published: partition directories the
        image no longer gives this broker (their topic deleted, or the partition moved, while it
        was down) are deleted, as Kafka's broker deletes stray partitions after its first
        metadata load. The quorum's own ``__cluster_metadata-0`` is never one."""
        image = self.publisher.image
        assigned = {
            (topic.name, index)
            for topic in image.topics_by_id.values()
            for index, registration in topic.partitions.items()
            if self.node_id in registration.replicas
        }
        strays = self.logs.remove_orphans(self.replicas.hosted() | assigned | {(METADATA_TOPIC, 0)})
        if strays:
            log.info("deleted %d stray partition(s): %s", len(strays), ", ".join(f"{t}-{p}" for t, p in strays[:10]))
        return strays

    async def controlled_shutdown(self) -> None:
        """A cluster node's broker asks the controller to move its leaderships away (bounded)."""
        if self.lifecycle is not None:
            await self.lifecycle.controlled_shutdown()

    def _open_transactions(self) -> None:
        """The transaction coordinator, with its state replayed from __transaction_state and
        every transaction left half-way by the previous run completed."""
        self.txn.open()

    def _open_groups(self) -> None:
        """The group coordinator, with its state replayed from __consumer_offsets."""
        self.groups.open()

    def _load_identity(self) -> str:
        """meta.properties, as Kafka writes it (version, cluster.id, node.id), checked as Kafka's
        MetaPropertiesEnsemble checks it: a configured node.id or cluster.id that differs from the
        stored one stops the start. Written only when the directory has none; never rewritten."""
        path = self.data_dir / META_PROPERTIES
        configured_cluster_id = self.config.get("cluster.id")
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else None
        except OSError as exc:
            raise StartupError(f"Unable to read {path}: {exc.strerror}") from exc
        if text is None:
            # Formatting on first start, where Kafka needs kafka-storage format; but only an empty
            # directory, so data whose meta.properties went missing is never taken for a new node's.
            if any(entry.name != LOCK_FILE_NAME for entry in self.data_dir.iterdir()):
                raise StartupError(
                    f"No `meta.properties` found in {self.data_dir}, which is not empty: kafkalike formats "
                    "only an empty data directory"
                )
            cluster_id = configured_cluster_id or _new_cluster_id()
            _write_meta_properties(path, cluster_id, self.node_id)
            return cluster_id
        stored_cluster_id, stored_node_id = _parse_meta_properties(text, path)
        if configured_cluster_id and stored_cluster_id and stored_cluster_id != configured_cluster_id:
            raise StartupError(
                f"Invalid cluster.id in: {path}. Expected {configured_cluster_id}, but read {stored_cluster_id}"
            )
        if stored_node_id is not None and stored_node_id != self.node_id:
            raise StartupError(
                f"Stored node id {stored_node_id} doesn't match previous node id {self.node_id} in {path}. "
                "If you moved your data, make sure your configured node id matches. If you intend to create "
                "a new node, you should remove all data in your data directories."
            )
        # A version-0 file may lack a cluster id; Kafka then takes the configured one (or a new one).
        return stored_cluster_id or configured_cluster_id or _new_cluster_id()

    def _read_metadata_values(self) -> list[bytes]:
        assert self._metadata_log is not None
        values = []
        blob = self._metadata_log.read_bytes(self._metadata_log.log_start_offset, 1 << 62)
        for pos, header in iter_batches(blob):
            values += [r.value for r in decode_records(blob, pos, header) if r.value is not None]
        return values

    def _append_metadata(self, values: list[bytes]) -> None:
        """Durable before the controller applies the records; a disk error leaves neither changed.
        The at-once path (start-up seeding, a producer id block ``reserve_producer_id`` missed):
        refused while an operation's records wait for their fsync, which a failure would cut."""
        assert self._metadata_log is not None
        if self._metadata_syncing:
            raise ControllerError(ErrorCode.KAFKA_STORAGE_ERROR, "another metadata operation is being written")
        # One batch per operation, so a crash keeps all of it or none.
        batch = bytearray(build_batch([Record(value=v) for v in values], base_timestamp=self.clock.wall_ms()))
        try:
            self._metadata_log.append_durably(batch, leader_epoch=self.metadata_epoch, now_ms=self.clock.wall_ms())
        except KafkaStorageError as exc:
            raise ControllerError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None

    async def _commit_metadata(self, records: list[dict[str, Any]]) -> None:
        """``controller.commit`` with the metadata log's fsync on a worker thread, for a caller
        holding ``_topic_changes`` (one metadata operation at a time, as Kafka's controller
        queue runs them): appended on the event loop, applied to the image only once durable
        (Kafka applies metadata records once committed); a failed fsync cuts the records off
        again and raises ControllerError (KAFKA_STORAGE_ERROR), the image unchanged."""
        assert self._metadata_log is not None
        plog = self._metadata_log
        now = self.clock.wall_ms()
        batch = bytearray(build_batch([Record(value=v) for v in self._legacy.encode(records)], base_timestamp=now))
        syncs = DeferredSyncs()
        error: OSError | None = None
        try:
            result = plog.append(batch, leader_epoch=self.metadata_epoch, now_ms=now, syncs=syncs)
            try:
                result = result._replace(flush=result.flush or plog.prepare_flush(syncs))
            except OSError as exc:
                syncs.discard()
                error = exc
            if error is None and syncs:
                self._metadata_syncing = True
                try:
                    with trio.CancelScope(shield=True):  # its outcome must reach the log
                        await trio.to_thread.run_sync(syncs.run)
                except OSError as exc:
                    error = exc
                finally:
                    self._metadata_syncing = False
            plog.complete_append(result, error, self.clock.wall_ms())
        except KafkaStorageError as exc:
            raise ControllerError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
        self._legacy.apply_durable(records)

    async def create_internal_topic(self, name: str, partitions: int, configs: dict[str, str]) -> bool:
        """An internal topic (``__consumer_offsets``, ``__transaction_state``) as a metadata
        operation of its own, in turn with the others; True if this call created it. Raises
        ControllerError (KAFKA_STORAGE_ERROR when the disk refused it)."""
        if self.cluster is not None:
            return await self.cluster.create_internal_topic(name, partitions, configs)
        async with self._topic_changes:
            if name in self.controller.image.topics:
                return False
            if self.ephemeral:  # no disk: nothing to wait for
                self.create_topic(name, partitions, configs)
                return True
            self._check_topic_configs(configs)
            topic, records = self._legacy.plan_topic(name, partitions, configs)
            try:
                await self._make_partitions([(topic, 0)], lambda: self._commit_metadata(records))
            except (KafkaStorageError, OSError) as exc:
                raise ControllerError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from None
            return True

    def registered_brokers(self) -> int:
        """How many brokers the metadata has registered (1: a single node)."""
        return 1 if self.cluster is None else len(self.cluster.image.cluster.brokers)

    async def reserve_producer_id(self) -> None:
        """Before ``controller.allocate_producer_id``: a producer id block with an id left, its
        record written (off the event loop, in turn) if a new one is needed, so the allocation
        itself writes nothing. Raises ControllerError when the disk refused it."""
        if self.cluster is not None:
            await self.cluster.reserve_producer_id()
            return
        if not self._legacy.plan_producer_ids():
            return
        async with self._topic_changes:
            records = self._legacy.plan_producer_ids()
            if records:
                await self._commit_metadata(records)

    async def set_configs(self, resource_type: int, resource_name: str, changes: Mapping[str, str | None]) -> None:
        """``controller.set_configs`` as a metadata operation in turn with the others."""
        if self.cluster is not None:
            await self.cluster.set_configs(resource_type, resource_name, changes)
            return
        async with self._topic_changes:
            records = self._legacy.plan_configs(resource_type, resource_name, changes)
            await self._commit_metadata(records)

    @property
    def metadata_end_offset(self) -> int:
        """The metadata log's end offset; every record below it is flushed, so it is also the
        quorum's high watermark."""
        assert self._metadata_log is not None
        return self._metadata_log.log_end_offset

    # -- topics -----------------------------------------------------------------------------

    def topic_properties(self, topic: TopicImage) -> dict[str, str | None]:
        """Every topic config's effective value: the topic's own, else the broker's (and the
        internal ones the topic sets, which have no default)."""
        return _with_internal(
            {name: topic.configs.get(name, self.config.topic_default(name)) for name in TOPIC_CONFIGS}, topic.configs
        )

    def log_config(self, topic: TopicImage) -> LogConfig:
        return LogConfig.from_properties(self.topic_properties(topic))

    def log_config_problem(self, overrides: Mapping[str, str], config: BrokerConfig | None = None) -> str | None:
        """Why a topic with ``overrides`` over ``config``'s defaults (this broker's unless given)
        could not have a log, or None. Checked before configs are stored: each value passing its
        own check is not enough, the log's settings as a whole must stand."""
        config = config or self.config
        props = _with_internal(
            {name: overrides.get(name, config.topic_default(name)) for name in TOPIC_CONFIGS}, overrides
        )
        try:
            LogConfig.from_properties(props)
        except ValueError as exc:
            return str(exc)
        return None

    def broker_config_problem(self, resource_name: str, dynamic: Mapping[str, str]) -> str | None:
        """``log_config_problem`` for every topic, were ``dynamic`` the broker resource's dynamic
        configs (``""``: the cluster-wide defaults)."""
        from kafkalike.server.connection_configs import dynamic_listener_problem, socket_server_problem

        listener_problem = dynamic_listener_problem(dict(dynamic))
        if listener_problem is not None:
            return listener_problem
        trial = BrokerConfig(self.config.explicit)
        trial.dynamic_default = dict(self.config.dynamic_default if resource_name else dynamic)
        trial.dynamic_broker = dict(dynamic if resource_name else self.config.dynamic_broker)
        requirement = trial.requirement_problem() or trial.dynamic_log_problem()
        if requirement is not None:
            return requirement
        for overrides in [{}, *(t.configs for t in self.controller.image.topics.values())]:
            problem = self.log_config_problem(overrides, trial)
            if problem is not None:
                return problem
        return socket_server_problem(trial)

    def log_config_for(self, overrides: Mapping[str, str]) -> LogConfig:
        """The LogConfig of a topic with ``overrides``, over this broker's defaults."""
        return LogConfig.from_properties(
            _with_internal(
                {name: overrides.get(name, self.config.topic_default(name)) for name in TOPIC_CONFIGS}, overrides
            )
        )

    def _take_dynamic_configs(self, cluster_default: Mapping[str, str], this_broker: Mapping[str, str]) -> None:
        """The broker resource's dynamic configs, as the publisher found them committed."""
        self.config.dynamic_default = dict(cluster_default)
        self.config.dynamic_broker = dict(this_broker)

    def apply_configs(self) -> None:
        """Make changed topic and broker configs take effect at once, without a restart."""
        image = self.controller.image
        self.config.dynamic_default = dict(image.broker_configs.get("", {}))
        self.config.dynamic_broker = dict(image.broker_configs.get(str(self.node_id), {}))
        self.replicas.apply_configs(lambda name: None if (t := image.topics.get(name)) is None else self.log_config(t))

    @property
    def partitions(self) -> ReplicaManager:
        """The replica manager, by its old name (the coordinator adapters' call sites)."""
        return self.replicas

    def _open_partitions(self, topic: TopicImage) -> None:
        config = self.log_config(topic)
        for index in range(topic.partitions):
            self.replicas.open_now(topic.name, index, topic.topic_id, config, self.clock.wall_ms())

    def _check_topic_configs(self, configs: Mapping[str, str]) -> None:
        for key, value in configs.items():
            if not is_topic_config(key):
                raise ControllerError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
            problem = validate_value(key, value)
            if problem is not None:
                raise ControllerError(ErrorCode.INVALID_CONFIG, problem)
        problem = self.log_config_problem(configs)
        if problem is not None:
            raise ControllerError(ErrorCode.INVALID_CONFIG, problem)

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str], validate_only: bool = False
    ) -> TopicImage:
        """Create a topic at once, its partitions opened on the event loop: for internal topics
        and start-up seeding. Requests use ``create_topics``."""
        self._check_topic_configs(configs)
        if name in self._topics_in_creation:
            raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        topic = self._legacy.create_topic(name, partitions, configs, validate_only)
        if not validate_only:
            self._open_partitions(topic)
        return topic

    def seed_topics(self, topics: list[tuple[str, int]]) -> None:
        """Create the named topics unless they exist (start-up seeding)."""
        for name, partitions in topics:
            if name not in self.controller.image.topics:
                self.create_topic(name, partitions, {})

    def may_auto_create(self, name: str) -> bool:
        """Whether a client asking for an unknown topic gets it created (auto.create.topics.enable)."""
        return self.config.get_bool("auto.create.topics.enable") and not name.startswith("__")

    # -- topic changes that wait for the disk ------------------------------------------------
    #
    # A request's topics become one metadata operation. Their partition directories and files
    # are made on worker threads before the operation is committed, so the event loop keeps
    # answering other clients, and a topic appears to them (Metadata, Produce) only once all of
    # its partitions are ready; until then it is unknown, as it is in Kafka while the controller
    # creates it. A crash half-way leaves directories no metadata names, removed at start-up.

    async def create_topics(
        self, wanted: list[NewTopic], validate_only: bool = False
    ) -> list[TopicImage | ControllerError]:
        """Create the topics as one operation: per topic the new topic or why not. Raises
        OperationTooLarge when their records would not fit in one operation (nothing created)."""
        if self.cluster is not None:
            return await self.cluster.create_topics(wanted, validate_only)
        async with self._topic_changes:
            names: set[str] = set()  # held back from the at-once path (internal topics) meanwhile
            try:
                return await self._create_topics_locked(wanted, validate_only, names)
            finally:
                self._topics_in_creation -= names

    async def _create_topics_locked(
        self, wanted: list[NewTopic], validate_only: bool, names: set[str]
    ) -> list[TopicImage | ControllerError]:
        results: list[TopicImage | ControllerError] = []
        records: list[dict[str, Any]] = []
        record_count = 0
        problems: dict[tuple[tuple[str, str], ...], str | None] = {}
        for index, topic in enumerate(wanted):
            try:
                self._check_topic_configs_cached(topic.configs, problems)
                if topic.name in self._topics_in_creation:
                    raise ControllerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
                planned, topic_records_ = self._legacy.plan_topic(topic.name, topic.partitions, topic.configs)
            except ControllerError as exc:
                results.append(exc)
                continue
            record_count += topic_records(topic.partitions, len(topic.configs))
            if record_count > MAX_RECORDS_PER_USER_OP:
                raise OperationTooLarge(ErrorCode.POLICY_VIOLATION, BATCH_TOO_LARGE)
            results.append(planned)
            records += topic_records_
            names.add(topic.name)
            self._topics_in_creation.add(topic.name)
            if index % TOPICS_BETWEEN_CHECKPOINTS == TOPICS_BETWEEN_CHECKPOINTS - 1:
                await trio.lowlevel.checkpoint()  # other clients get in between a big request's topics
        created = [r for r in results if isinstance(r, TopicImage)]
        if validate_only or not created:
            return results
        await self._make_partitions([(t, 0) for t in created], lambda: self._commit_metadata(records))
        return [self.controller.image.topics[r.name] if isinstance(r, TopicImage) else r for r in results]

    def _check_topic_configs_cached(
        self, configs: Mapping[str, str], problems: dict[tuple[tuple[str, str], ...], str | None]
    ) -> None:
        """``_check_topic_configs``, checked once per distinct set of configs in a request."""
        key = tuple(sorted(configs.items()))
        if key not in problems:
            try:
                self._check_topic_configs(configs)
                problems[key] = None
            except ControllerError as exc:
                problems[key] = exc.message
        problem = problems[key]
        if problem is not None:
            raise ControllerError(ErrorCode.INVALID_CONFIG, problem)

    async def grow_topics(
        self, wanted: list[tuple[str, int]], validate_only: bool = False
    ) -> list[TopicImage | ControllerError]:
        """CreatePartitions as one operation: per (topic, new count) the topic or why not. A topic
        whose new partitions overflow the operation gets UNKNOWN_SERVER_ERROR, as do the ones
        after it (see controller/limits.py)."""
        if self.cluster is not None:
            return await self.cluster.grow_topics(wanted, validate_only)
        async with self._topic_changes:
            results: list[TopicImage | ControllerError] = []
            grown: list[tuple[TopicImage, int]] = []
            records: list[dict[str, Any]] = []
            budget = RecordBudget()
            for name, count in wanted:
                try:
                    topic, record = self._legacy.plan_partitions(name, count)
                except ControllerError as exc:
                    results.append(exc)
                    continue
                if not budget.take(count - topic.partitions):
                    log.warning("CreatePartitions for %s refused: %s", name, BATCH_TOO_LARGE)
                    results.append(ControllerError(ErrorCode.UNKNOWN_SERVER_ERROR, None))
                    continue
                results.append(topic)
                grown.append((TopicImage(topic.name, topic.topic_id, count, topic.configs), topic.partitions))
                records.append(record)
            if validate_only or not grown:
                return results
            await self._make_partitions(grown, lambda: self._commit_metadata(records))
            return results

    async def delete_topics(self, names: list[str]) -> list[TopicImage | ControllerError]:
        """Delete the topics as one operation; their directories are removed on worker threads."""
        if self.cluster is not None:
            return await self.cluster.delete_topics(names)
        async with self._topic_changes:
            results: list[TopicImage | ControllerError] = []
            doomed: dict[str, TopicImage] = {}
            for name in names:
                topic = self.controller.image.topics.get(name)
                if topic is None or name in doomed:
                    results.append(
                        ControllerError(
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
                        )
                    )
                    continue
                results.append(topic)
                doomed[name] = topic
            if not doomed:
                return results
            try:
                await self._commit_metadata(
                    [{"type": "remove_topic", "topic_id": str(t.topic_id)} for t in doomed.values()]
                )
            except ControllerError as exc:  # the metadata log's disk refused the records: nothing deleted
                return [exc if isinstance(r, TopicImage) else r for r in results]
            paths = [p for t in doomed.values() for p in self._forget_partitions(t)]
            # Renamed before the next topic change may reuse the names; deleted after.
            renamed = await trio.to_thread.run_sync(rename_for_removal, paths)
            await self.groups.durable()  # the deleted topics' offset tombstones, before the answer
        await trio.to_thread.run_sync(delete_directories, renamed)
        return results

    def _forget_partitions(self, topic: TopicImage) -> list[Path]:
        paths = []
        for index in range(topic.partitions):
            path = self.replicas.detach(topic.name, index)
            if path is not None:
                paths.append(path)
        self.groups.on_topic_deleted(topic.name)
        return paths

    async def _make_partitions(
        self, topics: list[tuple[TopicImage, int]], commit: Callable[[], Awaitable[None]]
    ) -> None:
        """Create the partitions ``index >= first`` of each (topic, first) on worker threads, then
        ``await commit()`` (records durable, then applied) and register them, with no await
        between the apply and the registration; all or none. An error (OSError:
        a full disk, no file descriptors left) undoes what was made and propagates."""
        now = self.clock.wall_ms()
        wanted = [(topic, index) for topic, first in topics for index in range(first, topic.partitions)]
        by_overrides: dict[tuple[tuple[str, str], ...], LogConfig] = {}  # LogConfig is frozen: shared
        configs = {}
        for topic, _ in topics:
            key = tuple(sorted(topic.configs.items()))
            if key not in by_overrides:
                by_overrides[key] = self.log_config(topic)
            configs[topic.name] = by_overrides[key]
        # Placed in one pass.
        jobs = self.replicas.plan_new((t.name, index, t.topic_id, configs[t.name]) for t, index in wanted)
        try:
            await open_logs_off_loop(jobs, now, memory=self.logs.memory)
            try:
                await commit()
            except ControllerError as exc:  # the metadata log's disk refused the records
                raise KafkaStorageError(exc.message or "the metadata log could not be written") from None
        except BaseException as exc:
            await undo_new(self.replicas, jobs, exc)
            raise
        for new in jobs:
            if new.log is not None:
                new.topic_id = self.controller.image.topics[new.tp[0]].topic_id
                self.replicas.adopt(new)

    def request_auto_create(self, names: list[str]) -> None:
        """Have the named topics created in the background (Metadata answers them as unknown
        meanwhile, as Kafka does). Names already on their way are not asked for twice."""
        fresh = [n for n in dict.fromkeys(names) if n not in self._auto_create_pending]
        if not fresh:
            return
        if len(fresh) * self.config.get_int("num.partitions") > MAX_RECORDS_PER_USER_OP:
            # Refused by the controller anyway (controller/limits.py): not queued, so the queue
            # holds at most AUTO_CREATE_QUEUE requests of at most 10,000 names.
            log.warning("auto-creation of %d topic(s) refused: %s", len(fresh), PARTITIONS_OVER_LIMIT)
            return
        try:
            self._auto_create_send.send_nowait(fresh)
        except trio.WouldBlock:
            log.debug("auto-creation queue full; %d topic(s) not created now", len(fresh))
            return
        self._auto_create_pending.update(fresh)

    async def _auto_creator(self) -> None:
        """One CreateTopics per Metadata request that named unknown topics, with its limits."""
        async for names in self._auto_create_receive:
            try:
                partitions = self.config.get_int("num.partitions")
                await self.create_topics([NewTopic(n, partitions, {}) for n in names])
            except (ControllerError, OSError) as exc:
                log.warning("auto-creation of %d topic(s) refused: %s", len(names), exc)
            except Exception as exc:  # this task outlives any one request's failure
                log.error("auto-creation of %d topic(s) failed: %r", len(names), exc)
            finally:
                self._auto_create_pending.difference_update(names)
                self._auto_create_done.set()
                self._auto_create_done = trio.Event()

    def request_internal_topic(self, name: str, create: Callable[[], Awaitable[None]]) -> None:
        """Have ``create`` make the internal topic ``name`` in the background, as Kafka's broker
        asks its controller for ``__consumer_offsets`` / ``__transaction_state`` when
        FindCoordinator first needs one (and answers COORDINATOR_NOT_AVAILABLE meanwhile). Asked
        once while on its way; asked again by the next FindCoordinator if it failed."""
        if name in self._internal_pending:
            return
        try:
            self._internal_send.send_nowait((name, create))
        except trio.WouldBlock:
            return
        self._internal_pending.add(name)

    async def _internal_topic_creator(self) -> None:
        async for name, create in self._internal_receive:
            try:
                await create()
            except (ControllerError, OSError) as exc:
                log.warning("cannot create %s: %s", name, getattr(exc, "message", None) or exc)
            except Exception as exc:  # this task outlives any one request's failure
                log.error("creating %s failed: %r", name, exc)
            finally:
                self._internal_pending.discard(name)
                self._internal_done.set()
                self._internal_done = trio.Event()

    async def wait_internal_topics(self) -> None:
        """Until every internal topic asked for so far has been made or refused."""
        while self._internal_pending:
            await self._internal_done.wait()

    async def wait_auto_creations(self) -> None:
        """Until every auto-creation asked for so far has been made or refused."""
        while self._auto_create_pending:
            await self._auto_create_done.wait()

    # -- requests ---------------------------------------------------------------------------

    def api_versions(self) -> list[dict[str, Any]]:
        return [
            {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
            for h in sorted(self.handlers.values(), key=lambda h: h.api_key)
        ]

    # -- serving ----------------------------------------------------------------------------

    async def serve(self, host: str, port: int, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Bind every client listener (the first at ``host``:``port``, the others where
        ``listeners`` puts them; ListenerBindError, an OSError, for one that cannot be) and serve
        them; ``started`` with the first one's (host, port)."""
        from kafkalike.server.listener import advertise, bind_client_listeners, client_endpoints, serve_listeners

        configured = BrokerListeners.from_config(self.config)
        listeners = await bind_client_listeners(client_endpoints(configured, host, port))
        try:
            explicit = self.config.get("advertised.listeners") is not None
            self.advertised_endpoints = await advertise(configured, explicit, listeners)
        except BaseException:
            for listener in listeners:
                for sock in listener.sockets:
                    sock.socket.close()
            raise
        self.bound_listeners = {b.name: b.address for b in listeners}
        self.advertised_listeners = {e.name: (e.host, e.port) for e in self.advertised_endpoints}
        first = listeners[0]
        self.advertised = self.advertised_listeners.get(first.name) or next(
            iter(self.advertised_listeners.values()), first.address
        )
        self.clients_enabled = trio.Event()
        if not self.hold_clients:
            self.clients_enabled.set()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._keep_running, "background log jobs", self._background_jobs)
            if self.config.get_bool("log.cleaner.enable"):
                nursery.start_soon(self._keep_running, "log cleaner", self._log_cleaner)
            nursery.start_soon(self._keep_running, "group coordinator syncs", self.groups.syncs.run)
            nursery.start_soon(self._keep_running, "transaction coordinator syncs", self.txn.syncs.run)
            nursery.start_soon(self._keep_running, "group coordinator timers", self.groups.run)
            nursery.start_soon(self._keep_running, "transaction coordinator timers", self.txn.run)
            nursery.start_soon(self._keep_running, "topic auto-creation", self._auto_creator)
            if self.cluster is not None:
                nursery.start_soon(self._keep_running, "producer id blocks", self.cluster.run_producer_ids)
            nursery.start_soon(self._keep_running, "internal topic creation", self._internal_topic_creator)
            nursery.start_soon(serve_listeners, self, listeners)
            task_status.started((host, first.port))

    async def _keep_running(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        """Run a background job for as long as the broker serves: an exception it lets through
        (a bug; disk errors are handled where they happen) is logged, and the job restarted
        after a pause, rather than taking every connection down with the nursery."""
        last_logged_ms: int | None = None
        while True:
            try:
                await job()
                return
            except Exception:
                if (
                    last_logged_ms is None
                    or self.clock.wall_ms() - last_logged_ms >= BACKGROUND_RESTART_LOG_INTERVAL_MS
                ):
                    log.exception("%s failed; restarting it in %.0f s", name, BACKGROUND_RESTART_DELAY_S)
                    last_logged_ms = self.clock.wall_ms()
            await trio.sleep(BACKGROUND_RESTART_DELAY_S)

    async def _log_cleaner(self) -> None:
        """Compaction in bounded steps on this task, between appends (the logs take no locks)."""
        cleaner = LogCleaner(dedupe_buffer_bytes=self.config.get_int("log.cleaner.dedupe.buffer.size"))
        try:
            while True:
                more = self.logs.run_cleaner(cleaner, self.clock.wall_ms(), checkpoint=False)
                syncs = cleaner.take_syncs()  # a cleaned segment to fsync before its swap
                if syncs is not None:
                    try:
                        await trio.to_thread.run_sync(syncs.run)
                    except OSError as exc:
                        reporter.report("cleaning in", str(self.data_dir), exc, self.clock.wall_ms())
                        cleaner.abort()
                await self.checkpoint_offsets()
                await trio.sleep(0 if more else self.config.get_int("log.cleaner.backoff.ms") / 1000)
        finally:
            if cleaner.cleaning is not None:
                cleaner.abort(cleaner.cleaning)

    async def _background_jobs(self) -> None:
        """Flushes, checkpoints and retention: decided on the event loop, their fsyncs and
        unlinks on a worker thread (``LogManager`` prepares and completes each step)."""
        interval_s = self.config.get_int("log.retention.check.interval.ms") / 1000
        flush_ms = self.config.get("log.flush.interval.ms")
        tick_s = min(interval_s, int(flush_ms) / 1000 if flush_ms else interval_s, 1.0)
        next_retention = self.clock.monotonic_s() + interval_s
        while True:
            await trio.sleep(tick_s)
            prepared = self.logs.prepare_due_flushes(self.clock.wall_ms())
            errors = await _off_loop(functools.partial(run_flushes, prepared), any(p.syncs for p in prepared))
            self.logs.complete_flushes(prepared, errors, self.clock.wall_ms())
            retention_due = self.clock.monotonic_s() >= next_retention
            if retention_due:
                next_retention = self.clock.monotonic_s() + interval_s
                unlinks = DeferredSyncs()
                deleted = self.logs.run_retention(self.clock.wall_ms(), unlinks)
                deleted += await self.writer.roll_for_retention(self.replicas.values(), unlinks)
                try:
                    await _off_loop(unlinks.run, bool(unlinks))
                except OSError as exc:  # the files stay as *.deleted; start-up removes them
                    reporter.report("segment deletion in", str(self.data_dir), exc, self.clock.wall_ms())
                if deleted:
                    log.info("retention deleted %d segment(s)", deleted)
            if self.logs.checkpoint_due(self.clock.wall_ms()) or retention_due:
                await self.checkpoint_offsets()

    async def checkpoint_offsets(self) -> None:
        """The log dirs' checkpoint files whose offsets moved, written on a worker thread."""
        async with self._checkpoint_lock:  # one writer per file at a time
            pending = self.logs.prepare_checkpoints()
            if pending:
                errors = await trio.to_thread.run_sync(write_checkpoints, pending)
                self.logs.complete_checkpoints(pending, errors, self.clock.wall_ms())

    def close(self) -> None:
        self.logs.close_all()
        for lock in self._dir_locks:
            lock.release()

    async def aclose(self) -> None:
        """``close`` on a worker thread: its flushes, snapshots and checkpoints block no other
        task of the loop. Only once the broker has stopped serving (nothing else touches its
        logs meanwhile); an in-memory broker closes here, having nothing to wait for."""
        with trio.CancelScope(shield=True):
            if self.cluster is not None:
                await self.cluster.channel.aclose()
            await self.txn.aclose()
            await _off_loop(self.close, not self.logs.memory)


def client_listeners(config: BrokerConfig, name: str = "listeners") -> list[str]:
    """The entries of ``listeners`` (or ``advertised.listeners``) that clients are served on: all
    but the controller's (``controller.listener.names``), which a KRaft server.properties lists too."""
    controller = {n.strip().upper() for n in (config.get("controller.listener.names") or "").split(",")}
    entries = [e.strip() for e in (config.get(name) or "").split(",") if e.strip()]
    return [e for e in entries if "://" not in e or e.split("://", 1)[0].upper() not in controller]


def _lock_dirs(paths: list[Path]) -> list[DirLock]:
    try:
        return lock_log_dirs(paths)
    except LogDirError as exc:
        raise StartupError(str(exc)) from exc


def _parse_meta_properties(text: str, path: Path) -> tuple[str | None, int | None]:
    """(cluster.id, node.id) of a meta.properties file, refused in Kafka's words where Kafka
    refuses it: a version other than 0 or 1, a v1 file without its ids, an id not a number."""
    values = parse_properties(text)
    version_text = values.get("version", "0")
    try:
        version = int(version_text.strip())
    except ValueError:
        raise StartupError(f"Invalid meta.properties version string '{version_text}'") from None
    if version not in (0, 1):
        raise StartupError(f"Unknown meta.properties version number {version}")
    id_name = "node.id" if version == 1 else "broker.id"
    node_text = values.get(id_name)
    if node_text is None and version == 1:
        raise StartupError(f"node.id was not specified in {path}")
    cluster_id = values.get("cluster.id")
    if cluster_id is None and version == 1:
        raise StartupError(f"cluster.id was not specified in the v1 file: {path}")
    try:
        node_id = None if node_text is None else int(node_text)
    except ValueError:
        raise StartupError(f"Unable to read {id_name} as a base-10 number.") from None
    return cluster_id, node_id


def _write_meta_properties(path: Path, cluster_id: str, node_id: int) -> None:
    """Written whole to a temporary file and renamed over, so a crash never leaves half a file."""
    partial = path.with_name(path.name + ".tmp")
    try:
        with partial.open("w", encoding="utf-8") as out:
            out.write(f"#kafkalike meta.properties\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
            out.flush()
            os.fsync(out.fileno())
        partial.replace(path)
    except OSError as exc:
        raise StartupError(f"Unable to write {path}: {exc.strerror}") from exc


async def _off_loop(job: Callable[[], R], needed: bool) -> R:
    """``job()`` on a worker thread when ``needed`` (there are disk calls to make), else here:
    an in-memory broker never waits for a thread."""
    if needed:
        return await trio.to_thread.run_sync(job)
    return job()


def data_dir_of(config: BrokerConfig) -> Path:
    return config.log_dirs[0]


def _with_internal(props: dict[str, str | None], overrides: Mapping[str, str]) -> dict[str, str | None]:
    """``props`` plus the internal topic configs ``overrides`` sets."""
    props.update((name, overrides[name]) for name in INTERNAL_TOPIC_CONFIGS if name in overrides)
    return props
